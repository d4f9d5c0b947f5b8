-- Schema version 8: a cell names how its document was cut.
--
-- A chunked eval cuts each document at several sizes (and may give each chunk some of the
-- chunk before it as context); a cell's `chunk` index alone does not say which cut it belongs
-- to. `chunk_size` (0: the whole document) and `context_chars` (0: no context) join the key.
-- The table is rebuilt because its primary key changes (it is WITHOUT ROWID); every cell keeps
-- its run, with 0 for both.
CREATE TABLE cells_v8 (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    prompt        TEXT NOT NULL,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    max_tokens    INTEGER NOT NULL,
    constrained   INTEGER NOT NULL,
    repeat        INTEGER NOT NULL,
    -- The chunker's size the document was cut at (0: not cut), and the characters of the
    -- chunk before given as context.
    chunk_size    INTEGER NOT NULL DEFAULT 0,
    context_chars INTEGER NOT NULL DEFAULT 0,
    chunk         INTEGER NOT NULL DEFAULT 0,
    pass          INTEGER NOT NULL DEFAULT 0,
    row_id        TEXT NOT NULL,
    run_id        INTEGER REFERENCES runs (id) ON DELETE SET NULL,
    PRIMARY KEY (experiment_id, prompt, provider, model, max_tokens, constrained, repeat,
                 chunk_size, context_chars, chunk, pass, row_id)
) WITHOUT ROWID;

INSERT INTO cells_v8 (experiment_id, prompt, provider, model, max_tokens, constrained, repeat,
                      chunk_size, context_chars, chunk, pass, row_id, run_id)
    SELECT experiment_id, prompt, provider, model, max_tokens, constrained, repeat, 0, 0,
           chunk, pass, row_id, run_id
    FROM cells;

DROP TABLE cells;
ALTER TABLE cells_v8 RENAME TO cells;
CREATE INDEX cells_by_run ON cells (run_id);
