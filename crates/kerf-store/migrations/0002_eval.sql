-- Schema version 2: evaluations (`kerf eval`).
--
-- `experiments.kind` gains 'eval'. SQLite cannot change a CHECK in place, so the table is rebuilt
-- (SQLite's documented twelve steps). `migrate` turns foreign keys off around this file: with
-- them on, dropping the old table would null every run's experiment_id (ON DELETE SET NULL).
CREATE TABLE experiments_v2 (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('compare', 'sweep', 'eval')),
    status      TEXT NOT NULL CHECK (status IN ('running', 'ok', 'interrupted', 'error')),
    created_at  INTEGER NOT NULL,
    finished_at INTEGER,
    spec        TEXT NOT NULL,
    result      TEXT,
    error       TEXT,
    owner       TEXT,
    note        TEXT
);
INSERT INTO experiments_v2 (id, kind, status, created_at, finished_at, spec, result, error, owner, note)
    SELECT id, kind, status, created_at, finished_at, spec, result, error, owner, note FROM experiments;
DROP TABLE experiments;
ALTER TABLE experiments_v2 RENAME TO experiments;
CREATE INDEX experiments_by_time ON experiments (created_at);

-- An eval's dataset rows as it ran them, in order, so `eval resume` and `eval rescore` need
-- neither the dataset file nor its state when the eval began.
CREATE TABLE eval_rows (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    row_id        TEXT NOT NULL,
    row           TEXT NOT NULL,
    PRIMARY KEY (experiment_id, seq)
) WITHOUT ROWID;

-- One cell of an eval's matrix (prompt × budget × constraint × repeat × row) and the run that
-- measures it. Written in the same transaction as its run begins, so a cell whose run finished
-- is never run again. A retry replaces the cell's run: the key holds each cell once.
CREATE TABLE eval_cells (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    prompt        TEXT NOT NULL,
    max_tokens    INTEGER NOT NULL,
    constrained   INTEGER NOT NULL,
    repeat        INTEGER NOT NULL,
    row_id        TEXT NOT NULL,
    run_id        INTEGER REFERENCES runs (id) ON DELETE SET NULL,
    PRIMARY KEY (experiment_id, prompt, max_tokens, constrained, repeat, row_id)
) WITHOUT ROWID;
CREATE INDEX eval_cells_by_run ON eval_cells (run_id);
