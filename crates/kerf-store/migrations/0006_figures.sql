-- Schema version 6: what lists show of an experiment's result, in columns of their own.
--
-- The History list read each experiment's figures out of its result JSON (an eval's pending
-- cells and each summary line's F1, a test's verdict counts, a compare's rows), and left out any
-- result of 8 MB or more so the list stayed quick: a large eval listed without its figures. Now
-- an experiment keeps them typed as it settles, and the list reads columns. Every experiment
-- already settled gets them here from its result, as the list read them before.
ALTER TABLE experiments ADD COLUMN pending INTEGER;
ALTER TABLE experiments ADD COLUMN passed INTEGER;
ALTER TABLE experiments ADD COLUMN failed INTEGER;
ALTER TABLE experiments ADD COLUMN errors INTEGER;
ALTER TABLE experiments ADD COLUMN result_rows INTEGER;

-- An eval's summary lines: one per prompt, provider, budget and constraint.
CREATE TABLE result_lines (
    experiment_id INTEGER NOT NULL REFERENCES experiments (id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    prompt        TEXT NOT NULL,
    provider      TEXT,
    max_tokens    INTEGER NOT NULL,
    constrained   INTEGER NOT NULL,
    f1            REAL,
    PRIMARY KEY (experiment_id, seq)
) WITHOUT ROWID;

-- A result that is not JSON (a file edited by hand) gives no figures, never a failed migration.
UPDATE experiments SET pending = json_extract(result, '$.pending')
    WHERE kind = 'eval'
      AND json_type(CASE WHEN json_valid(result) THEN result END, '$.pending') = 'integer';
UPDATE experiments SET passed = json_extract(result, '$.passed'),
                       failed = json_extract(result, '$.failed'),
                       errors = json_extract(result, '$.errors')
    WHERE kind = 'test'
      AND json_type(CASE WHEN json_valid(result) THEN result END, '$.passed') = 'integer'
      AND json_type(CASE WHEN json_valid(result) THEN result END, '$.failed') = 'integer'
      AND json_type(CASE WHEN json_valid(result) THEN result END, '$.errors') = 'integer';
UPDATE experiments SET result_rows = json_array_length(result, '$.rows')
    WHERE kind = 'compare'
      AND json_type(CASE WHEN json_valid(result) THEN result END, '$.rows') = 'array';

INSERT INTO result_lines (experiment_id, seq, prompt, provider, max_tokens, constrained, f1)
    SELECT e.id, l.key, json_extract(l.value, '$.prompt'), json_extract(l.value, '$.provider'),
           json_extract(l.value, '$.max_tokens'),
           coalesce(json_extract(l.value, '$.constrained'), 0), json_extract(l.value, '$.f1')
    FROM experiments e,
         json_each(CASE WHEN e.kind = 'eval' AND json_valid(e.result)
                         AND json_type(e.result, '$.summary') = 'array'
                        THEN e.result ELSE '{"summary": []}' END, '$.summary') l
    WHERE json_type(CASE WHEN l.type = 'object' THEN l.value END, '$.prompt') = 'text'
      AND json_type(CASE WHEN l.type = 'object' THEN l.value END, '$.max_tokens') = 'integer';
