-- Schema version 4: a cell's score, kept with its run.
--
-- Scoring a reply against its row's expected records is the costly part of an eval's report;
-- `eval show`, `report` and the window's Evaluate screen opened every eval by scoring every
-- cell again. The score is kept here once made, under the run that measured the cell and a
-- key naming everything the score depends on (the eval and row, the prompt's text and its
-- `match` settings, which objects were scored, the scoring's own version): a changed `match`
-- (`eval rescore`) is another key, scored afresh. Only ever a cache: dropping rows loses
-- nothing but time.
CREATE TABLE cell_scores (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    key    TEXT NOT NULL,
    score  TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;
