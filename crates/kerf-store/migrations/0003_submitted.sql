-- Schema version 3: requests submitted to a provider and awaited by no live process.
--
-- A run (and an experiment) may be `submitted`: its request was handed to a provider that
-- answers later (a batch API), and no process is streaming it. Recovery leaves it alone — only
-- `running` rows whose process died are interrupted — and any later process may settle it. The
-- provider's handle for it is `runs.submission`. Experiments may also be of kind 'test'.
-- SQLite cannot change a CHECK in place, so both tables are rebuilt (SQLite's documented
-- twelve steps; `migrate` turns foreign keys off around this file, so dropping the old tables
-- touches no row that refers to them).
CREATE TABLE experiments_v3 (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('compare', 'sweep', 'eval', 'test')),
    status      TEXT NOT NULL
                CHECK (status IN ('running', 'submitted', 'ok', 'interrupted', 'error')),
    created_at  INTEGER NOT NULL,
    finished_at INTEGER,
    spec        TEXT NOT NULL,
    result      TEXT,
    error       TEXT,
    owner       TEXT,
    note        TEXT
);
INSERT INTO experiments_v3 (id, kind, status, created_at, finished_at, spec, result, error, owner, note)
    SELECT id, kind, status, created_at, finished_at, spec, result, error, owner, note FROM experiments;
DROP TABLE experiments;
ALTER TABLE experiments_v3 RENAME TO experiments;
CREATE INDEX experiments_by_time ON experiments (created_at);

CREATE TABLE runs_v3 (
    id                INTEGER PRIMARY KEY,
    created_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    status            TEXT NOT NULL
                      CHECK (status IN ('running', 'submitted', 'ok', 'truncated', 'interrupted', 'error')),
    prompt_version    TEXT NOT NULL REFERENCES prompt_versions (id),
    prompt_name       TEXT NOT NULL,
    input_id          TEXT NOT NULL REFERENCES inputs (id),
    experiment_id     INTEGER REFERENCES experiments (id) ON DELETE SET NULL,
    rerun_of          INTEGER,
    provider          TEXT NOT NULL,
    model             TEXT NOT NULL,
    model_sha256      TEXT,
    params            TEXT NOT NULL,
    finish_reason     TEXT,
    objects           INTEGER,
    dropped           INTEGER,
    truncated         INTEGER,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    cost_usd          REAL,
    attempts          INTEGER NOT NULL DEFAULT 1,
    error_code        TEXT,
    error             TEXT,
    -- The process writing a running run (see owners/ next to the database file).
    owner             TEXT,
    note              TEXT,
    -- A submitted run's handle at its provider (a batch id and the request's id in it).
    submission        TEXT
);
INSERT INTO runs_v3 (id, created_at, finished_at, status, prompt_version, prompt_name, input_id,
    experiment_id, rerun_of, provider, model, model_sha256, params, finish_reason, objects,
    dropped, truncated, prompt_tokens, completion_tokens, cost_usd, attempts, error_code, error,
    owner, note)
    SELECT id, created_at, finished_at, status, prompt_version, prompt_name, input_id,
    experiment_id, rerun_of, provider, model, model_sha256, params, finish_reason, objects,
    dropped, truncated, prompt_tokens, completion_tokens, cost_usd, attempts, error_code, error,
    owner, note FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v3 RENAME TO runs;
CREATE INDEX runs_by_time ON runs (created_at);
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_provider ON runs (provider, created_at);
CREATE INDEX runs_by_prompt ON runs (prompt_name, created_at);
CREATE INDEX runs_by_version ON runs (prompt_version);
CREATE INDEX runs_by_experiment ON runs (experiment_id);
