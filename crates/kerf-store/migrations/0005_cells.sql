-- Schema version 5: one cell record for every kind of experiment.
--
-- `eval_cells` keyed an eval's cells by prompt, budget, constraint, repeat and row: no provider,
-- so one experiment could not hold two models, and no other kind kept its cells at all. `cells`
-- is the same record for every kind (a compare's, an eval's, a prompt file's tests), keyed by
-- the provider and model too, with a chunk and a pass (0 until a plan cuts documents or runs
-- several passes). A cell is still written in the transaction that begins its run, so a cell
-- whose run finished is never bought again.
--
-- Each existing eval cell keeps its run; its provider and model are the ones the eval's spec
-- names (an eval ran on one), or, where a spec lacks them, its run's.
CREATE TABLE cells (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    -- The prompt as the experiment's spec names it (an eval's or test's prompt id, a compare's
    -- contender).
    prompt        TEXT NOT NULL,
    provider      TEXT NOT NULL,
    model         TEXT NOT NULL,
    max_tokens    INTEGER NOT NULL,
    constrained   INTEGER NOT NULL,
    repeat        INTEGER NOT NULL,
    chunk         INTEGER NOT NULL DEFAULT 0,
    pass          INTEGER NOT NULL DEFAULT 0,
    -- The dataset row's id (a test's name; '' for a kind with one input).
    row_id        TEXT NOT NULL,
    run_id        INTEGER REFERENCES runs (id) ON DELETE SET NULL,
    PRIMARY KEY (experiment_id, prompt, provider, model, max_tokens, constrained, repeat, chunk,
                 pass, row_id)
) WITHOUT ROWID;
CREATE INDEX cells_by_run ON cells (run_id);

INSERT INTO cells (experiment_id, prompt, provider, model, max_tokens, constrained, repeat,
                   chunk, pass, row_id, run_id)
    SELECT c.experiment_id, c.prompt,
           coalesce(CASE WHEN json_valid(e.spec) THEN json_extract(e.spec, '$.provider') END,
                    r.provider, ''),
           coalesce(CASE WHEN json_valid(e.spec) THEN json_extract(e.spec, '$.model') END,
                    r.model, ''),
           c.max_tokens, c.constrained, c.repeat, 0, 0, c.row_id, c.run_id
    FROM eval_cells c
    JOIN experiments e ON e.id = c.experiment_id
    LEFT JOIN runs r ON r.id = c.run_id;

DROP TABLE eval_cells;
