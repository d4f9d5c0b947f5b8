-- Schema version 7: batches handed to a provider's batch API (or written to a batch file).
--
-- An experiment's requests may go by batch: each request is a run kept `submitted`, whose
-- `runs.submission` names its batch and its id in it (`{"batch": N, "custom_id": "…"}`), and
-- each batch is a row here. A batch is stored before it is sent (`unsent`), so a process killed
-- while sending leaves a row a later one sends or finds; once the provider holds it, its id is
-- kept (`remote_id`), then its state and counts as last polled, and when its results have been
-- folded into the runs, `folded`.
CREATE TABLE batches (
    id            INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    -- The provider's name, as the experiment's spec and its runs name it.
    provider      TEXT NOT NULL,
    -- Which batch interface: 'openai', 'anthropic', 'gemini', or 'file' (a vLLM run-batch file).
    api           TEXT NOT NULL CHECK (api IN ('openai', 'anthropic', 'gemini', 'file')),
    -- The endpoint every line names (OpenAI and files: /v1/chat/completions or /v1/responses).
    endpoint      TEXT,
    -- The provider's id for the batch (a file batch: the path written).
    remote_id     TEXT,
    -- The uploaded input file's id (OpenAI).
    input_file    TEXT,
    requests      INTEGER NOT NULL,
    bytes         INTEGER NOT NULL,
    state         TEXT NOT NULL
                  CHECK (state IN ('unsent', 'running', 'ended', 'failed', 'folded')),
    -- The provider's own word for where it stands ('in_progress', 'BATCH_STATE_RUNNING', …).
    remote_state  TEXT,
    -- Counts as last polled: {"total", "processing", "succeeded", "errored", "expired", "canceled"}.
    counts        TEXT,
    created_at    INTEGER NOT NULL,
    sent_at       INTEGER,
    ended_at      INTEGER,
    folded_at     INTEGER,
    error         TEXT
);
CREATE INDEX batches_by_experiment ON batches (experiment_id);
CREATE INDEX runs_submitted ON runs (experiment_id) WHERE status = 'submitted';
