-- Kerf's history, schema version 1. Times are milliseconds since the Unix epoch (UTC).
-- Migrations only ever add: a file written by this version stays readable by later ones.

-- A prompt file exactly as it was run (its schema is inline), addressed by the SHA-256 of its
-- text: an edited prompt is a new version, and old runs keep pointing at what they ran.
CREATE TABLE prompt_versions (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    path          TEXT,
    response_type TEXT NOT NULL,
    text          TEXT NOT NULL,
    created_at    INTEGER NOT NULL
);
CREATE INDEX prompt_versions_by_name ON prompt_versions (name);

-- What a prompt was rendered with: the run's variables (the document included) and global
-- terms, addressed by the SHA-256 of their JSON.
CREATE TABLE inputs (
    id         TEXT PRIMARY KEY,
    vars       TEXT NOT NULL,
    terms      TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- A compare or a sweep: what was asked, and (once finished) its rows and curves.
CREATE TABLE experiments (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('compare', 'sweep')),
    status      TEXT NOT NULL CHECK (status IN ('running', 'ok', 'interrupted', 'error')),
    created_at  INTEGER NOT NULL,
    finished_at INTEGER,
    spec        TEXT NOT NULL,
    result      TEXT,
    error       TEXT,
    owner       TEXT,
    note        TEXT
);
CREATE INDEX experiments_by_time ON experiments (created_at);

-- One model call (with its repair attempts). The summary columns are what lists and filters
-- read; the long texts live in run_bodies so a list never pages through replies.
CREATE TABLE runs (
    id                INTEGER PRIMARY KEY,
    created_at        INTEGER NOT NULL,
    finished_at       INTEGER,
    status            TEXT NOT NULL
                      CHECK (status IN ('running', 'ok', 'truncated', 'interrupted', 'error')),
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
    note              TEXT
);
CREATE INDEX runs_by_time ON runs (created_at);
CREATE INDEX runs_by_status ON runs (status, created_at);
CREATE INDEX runs_by_provider ON runs (provider, created_at);
CREATE INDEX runs_by_prompt ON runs (prompt_name, created_at);
CREATE INDEX runs_by_version ON runs (prompt_version);
CREATE INDEX runs_by_experiment ON runs (experiment_id);

CREATE TABLE run_bodies (
    run_id   INTEGER PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    system   TEXT,
    user     TEXT NOT NULL,
    -- The reply exactly as received: complete once the run has ended.
    raw      TEXT NOT NULL DEFAULT '',
    report   TEXT,
    usage    TEXT,
    timings  TEXT,
    cost     TEXT,
    details  TEXT,
    -- Earlier replies of a repair loop, oldest first (JSON array).
    earlier  TEXT
);

-- Reply text while a run streams, one row per flushed batch; folded into run_bodies.raw when
-- the run ends (or when the next open finds its process gone).
CREATE TABLE run_chunks (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq    INTEGER NOT NULL,
    text   TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE TABLE run_tags (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    tag    TEXT NOT NULL,
    PRIMARY KEY (run_id, tag)
) WITHOUT ROWID;
CREATE INDEX run_tags_by_tag ON run_tags (tag);

-- SHA-256 of local model files, remembered by path, size and modification time so a run on a
-- multi-gigabyte GGUF does not hash it again.
CREATE TABLE model_hashes (
    path     TEXT PRIMARY KEY,
    size     INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256   TEXT NOT NULL
);
