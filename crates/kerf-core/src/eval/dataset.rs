//! Datasets: documents to run a prompt on, with the records a correct extraction holds.
//!
//! Three forms, read into the same [`Row`]s:
//! - **JSONL**, one row per line: `{"id", "input", "vars", "expected"}`. `input` fills the prompt's
//!   input variable, `vars` any others, `expected` (optional) is the gold record set — an array
//!   in the prompt's record shape, or an object of such arrays keyed by prompt id (one dataset
//!   for prompts of different shapes; a prompt also finds the records kept under its twin's id).
//! - **CSV** with a header: a column per variable, plus optional `id`, `input` and `expected` (a
//!   JSON cell). A cell that starts with `[` or `{` is read as JSON (a list of entity types).
//! - **A folder** of `NAME.txt` documents, each with an optional `NAME.expected.jsonl` (one record
//!   per line) and `NAME.vars.json` beside it; a `vars.json` in the folder applies to every row.
//!
//! Loading finds every structural problem (bad JSON, unknown keys, duplicate ids, oversized
//! rows); [`check`] then holds each row to the prompts it will run with (unknown and missing
//! variables, expected records that fail the record schema). Both name the row by id and line,
//! and the field by JSON pointer or column; nothing runs until there are no problems.
//!
//! [`scan`] reads a dataset a row at a time, finding the same problems as [`load`] (which is
//! `scan` keeping every row), and [`Checker`] holds one row at a time to the prompts: an eval
//! over a million rows never has them all in memory at once ([`held`] counts the rows alive).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result, strip_position};
use crate::eval::score::without_aliases;
use crate::{Prompt, limits};

/// The records a correct extraction of a row holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Expected {
    /// One record set, for every prompt.
    All(Vec<Value>),
    /// Record sets by prompt id.
    ByPrompt(BTreeMap<String, Vec<Value>>),
}

/// One document of a dataset. Its JSON form is how an eval keeps the rows it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub id: String,
    /// The file the row came from (the dataset file, or the document in a folder).
    pub file: String,
    /// 1-based line of the row in `file` (0: `file` names the place itself, as a prompt
    /// test's pointer does).
    pub line: usize,
    /// The document, for the prompt's input variable.
    pub input: Option<String>,
    pub vars: Map<String, Value>,
    pub expected: Option<Expected>,
    /// For a folder row: the `.expected.jsonl` file and the line of each record, for errors.
    #[serde(skip)]
    expected_lines: Option<(String, Vec<usize>)>,
    #[serde(skip)]
    held: held::Held,
}

/// How many [`Row`]s the current thread holds, now and at most: what the tests of a large
/// eval hold its plan and its run to (every row is read, checked and rendered, and none is
/// kept longer than the cell that needs it).
pub mod held {
    use std::cell::Cell;

    thread_local! {
        /// Rows alive on this thread, and the most alive at once since [`reset`].
        static ROWS: Cell<(usize, usize)> = const { Cell::new((0, 0)) };
    }

    /// Rows alive on this thread now.
    pub fn now() -> usize {
        ROWS.with(|c| c.get().0)
    }

    /// The most rows alive on this thread at once since [`reset`].
    pub fn peak() -> usize {
        ROWS.with(|c| c.get().1)
    }

    /// Start counting the peak again from the rows alive now.
    pub fn reset() {
        ROWS.with(|c| c.set((c.get().0, c.get().0)));
    }

    /// One row's share of the count: made with its row, dropped with it.
    #[derive(Debug)]
    pub(super) struct Held(());

    impl Held {
        pub(super) fn new() -> Held {
            ROWS.with(|c| {
                let (now, peak) = c.get();
                c.set((now + 1, peak.max(now + 1)));
            });
            Held(())
        }
    }

    impl Default for Held {
        fn default() -> Held {
            Held::new()
        }
    }

    impl Clone for Held {
        fn clone(&self) -> Held {
            Held::new()
        }
    }

    impl PartialEq for Held {
        fn eq(&self, _: &Held) -> bool {
            true
        }
    }

    impl Drop for Held {
        fn drop(&mut self) {
            ROWS.with(|c| {
                let (now, peak) = c.get();
                c.set((now.saturating_sub(1), peak));
            });
        }
    }
}

impl Row {
    /// A row with nothing read into it yet.
    fn blank(id: String, file: &str, line: usize) -> Row {
        Row {
            id,
            file: file.to_string(),
            line,
            input: None,
            vars: Map::new(),
            expected: None,
            expected_lines: None,
            held: held::Held::new(),
        }
    }

    /// `FILE:LINE, row ID`: how problems name the row.
    pub fn place(&self) -> String {
        let id = crate::error::quoted(&self.id);
        if self.line == 0 {
            return format!("{}, row `{id}`", self.file);
        }
        format!("{}:{}, row `{id}`", self.file, self.line)
    }

    /// The expected records for `prompt` (by its id, then its twin's), and the JSON pointer
    /// they sit under in the row.
    pub fn expected_for(&self, prompt: &Prompt) -> Option<(&[Value], String)> {
        match self.expected.as_ref()? {
            Expected::All(v) => Some((v, "/expected".into())),
            Expected::ByPrompt(by) => [Some(prompt.id()), prompt.file.twin.as_deref()]
                .into_iter()
                .flatten()
                .find_map(|id| {
                    by.get(id)
                        .map(|v| (v.as_slice(), format!("/expected/{}", escape(id))))
                }),
        }
    }

    /// [`Row::vars_for`] with `input` (a chunk's text) under the prompt's input variable, in
    /// the document's place: the document is never copied (a book cut into thousands of chunks
    /// was a copy of the book per chunk).
    pub fn vars_with_input(&self, prompt: &Prompt, input: Value) -> Map<String, Value> {
        let name = prompt.file.input_variable();
        let mut input = Some(input);
        let mut vars = Map::new();
        for (k, v) in &self.vars {
            let v = if k == name {
                input.take().unwrap_or(Value::Null)
            } else {
                v.clone()
            };
            vars.insert(k.clone(), v);
        }
        if let Some(input) = input {
            vars.insert(name.to_string(), input);
        }
        vars
    }

    /// The variables a prompt renders this row with: `vars`, and the document under the
    /// prompt's input variable.
    pub fn vars_for(&self, prompt: &Prompt) -> Map<String, Value> {
        match &self.input {
            Some(input) => self.vars_with_input(prompt, Value::String(input.clone())),
            None => self.vars.clone(),
        }
    }

    /// The document as grounding reads it: `input`, else the prompt's input variable.
    pub fn document(&self, prompt: &Prompt) -> Option<&str> {
        self.input.as_deref().or_else(|| {
            self.vars
                .get(prompt.file.input_variable())
                .and_then(Value::as_str)
        })
    }
}

/// A loaded dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub path: PathBuf,
    pub rows: Vec<Row>,
}

/// A prompt file's `tests` as a dataset, a row per test (its `name` the row's id), so a test is
/// checked, rendered and scored as any dataset row is. `path` is the prompt file; each row's
/// line is its index under `tests` (from 1).
pub fn from_tests(path: &Path, tests: &[crate::PromptTest]) -> Dataset {
    Dataset {
        path: path.to_path_buf(),
        rows: tests
            .iter()
            .enumerate()
            .map(|(i, t)| Row {
                input: t.input.clone(),
                vars: t.vars.clone(),
                expected: Some(Expected::All(t.expected.clone())),
                ..Row::blank(t.name.clone(), &format!("{}#/tests/{i}", path.display()), 0)
            })
            .collect(),
    }
}

fn escape(key: &str) -> String {
    // Keys are the dataset's: quoted short, as every value a message repeats.
    crate::error::quoted(key)
        .replace('~', "~0")
        .replace('/', "~1")
}

/// Load a dataset: a `.jsonl` file, a `.csv` file, or a folder of `.txt` documents.
pub fn load(path: &Path) -> Result<Dataset> {
    let mut rows = Vec::new();
    scan(path, &mut |row| {
        rows.push(row);
        Ok(())
    })?;
    Ok(Dataset {
        path: path.to_path_buf(),
        rows,
    })
}

/// Read the dataset at `path` a row at a time, as [`load`] reads it: `each` is handed every row
/// in order, and every problem `load` finds (bad JSON, unknown keys, duplicate ids, oversized
/// rows, no rows) is the same error, once the whole dataset has been read — so `each` must
/// keep nothing it cannot take back until `scan` returns `Ok`. An error from `each` stops the
/// reading and is returned. Returns the number of rows.
pub fn scan<E: From<Error>>(
    path: &Path,
    each: &mut dyn FnMut(Row) -> std::result::Result<(), E>,
) -> std::result::Result<usize, E> {
    let place = path.display().to_string();
    let mut problems = Vec::new();
    let mut ids = Ids::default();
    let mut rows = 0;
    let mut sink = |row: Row| -> std::result::Result<(), E> {
        ids.see(&row);
        rows += 1;
        each(row)
    };
    if path.is_dir() {
        load_folder(path, &mut problems, &mut sink)?;
    } else {
        // A link to a device (`/dev/zero`) or a FIFO would be read forever.
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if !meta.is_file() {
            return Err(Error::Usage(format!(
                "{place}: not a regular file (a device, a pipe or a socket); a dataset is a .jsonl or .csv file, or a folder of .txt documents"
            ))
            .into());
        }
        match path.extension().and_then(|e| e.to_str()) {
            Some("csv") => load_csv(path, &mut problems, &mut sink)?,
            Some("jsonl" | "ndjson") => load_jsonl(path, &mut problems, &mut sink)?,
            _ => {
                return Err(Error::Usage(format!(
                    "{place}: a dataset is a .jsonl or .csv file, or a folder of .txt documents"
                ))
                .into());
            }
        }
    }
    // Duplicate ids come after the other problems, as they are found once every row is read.
    problems.extend(ids.problems);
    if rows == 0 && problems.is_empty() {
        problems.push(format!("{place}: no rows"));
    }
    if problems.is_empty() {
        Ok(rows)
    } else {
        Err(Error::Dataset { place, problems }.into())
    }
}

/// The rows' ids seen so far, each with where its latest row is, and the duplicates found.
#[derive(Default)]
struct Ids {
    /// Row id → (index into `files`, line).
    seen: std::collections::HashMap<Box<str>, (usize, usize)>,
    /// The files rows came from, each once in a run of rows from it.
    files: Vec<String>,
    problems: Vec<String>,
}

impl Ids {
    fn see(&mut self, r: &Row) {
        if self.files.last() != Some(&r.file) {
            self.files.push(r.file.clone());
        }
        let here = (self.files.len() - 1, r.line);
        if let Some((file, line)) = self.seen.insert(r.id.as_str().into(), here) {
            self.problems.push(format!(
                "{}: id `{}` is also the id of the row at {}:{}",
                r.place(),
                crate::error::quoted(&r.id),
                self.files[file],
                line
            ));
        }
    }
}

/// The lines of a file, each with its 1-based number, read as they are asked for; a line longer
/// than the row limit is skipped unread and reported by its size, so a 100 MB line never sits
/// in memory.
fn bounded_lines(path: &Path) -> Result<BoundedLines> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    Ok(bounded_lines_of(file, path))
}

/// [`bounded_lines`] of a file already opened (and checked) as `path`.
fn bounded_lines_of(file: std::fs::File, path: &Path) -> BoundedLines {
    BoundedLines {
        path: path.to_path_buf(),
        reader: BufReader::new(file),
        max: limits::max_row_bytes(),
        n: 0,
    }
}

/// The iterator [`bounded_lines`] gives: `(line, Ok(text) or Err(size))`, or the error that
/// stopped the reading.
struct BoundedLines {
    path: PathBuf,
    reader: BufReader<std::fs::File>,
    max: u64,
    /// The number of the last line read.
    n: usize,
}

type Line = (usize, std::result::Result<String, u64>);

impl BoundedLines {
    fn read_line(&mut self) -> Result<Option<Line>> {
        let path = self.path.as_path();
        self.n += 1;
        let n = self.n;
        let mut buf = Vec::new();
        let mut size: u64 = 0;
        let mut over = false;
        let ended = loop {
            let chunk = self.reader.fill_buf().map_err(|e| Error::io(path, e))?;
            if chunk.is_empty() {
                break size == 0;
            }
            let (take, newline) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            size += take as u64;
            if size > self.max {
                over = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
            self.reader.consume(take);
            if newline {
                break false;
            }
        };
        if ended {
            return Ok(None);
        }
        if over {
            return Ok(Some((n, Err(size))));
        }
        let mut text = String::from_utf8(buf).map_err(|e| Error::Utf8 {
            place: format!("{}:{n}", path.display()),
            offset: e.utf8_error().valid_up_to(),
        })?;
        let end = text.trim_end_matches(['\n', '\r']).len();
        text.truncate(end);
        if n == 1 && text.starts_with('\u{feff}') {
            text.drain(..'\u{feff}'.len_utf8());
        }
        Ok(Some((n, Ok(text))))
    }
}

impl Iterator for BoundedLines {
    type Item = Result<Line>;

    fn next(&mut self) -> Option<Result<Line>> {
        self.read_line().transpose()
    }
}

fn too_large(file: &str, line: usize, size: u64) -> String {
    format!(
        "{file}:{line}: the row is {:.1} MiB, over the limit of {} MiB (KERF_MAX_ROW_MIB)",
        size as f64 / (1 << 20) as f64,
        limits::max_row_bytes() >> 20
    )
}

fn load_jsonl<E: From<Error>>(
    path: &Path,
    problems: &mut Vec<String>,
    each: &mut dyn FnMut(Row) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let file = path.display().to_string();
    for read in bounded_lines(path)? {
        let (line, text) = read?;
        let text = match text {
            Ok(t) => t,
            Err(size) => {
                problems.push(too_large(&file, line, size));
                continue;
            }
        };
        if text.trim().is_empty() {
            continue;
        }
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!(
                    "{file}:{line}: not valid JSON (column {}): {}",
                    e.column(),
                    strip_position(&e.to_string())
                ));
                continue;
            }
        };
        let Value::Object(mut m) = value else {
            problems.push(format!("{file}:{line}: a row must be a JSON object"));
            continue;
        };
        let id = match m.remove("id") {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(Value::Number(n)) => n.to_string(),
            None => format!("line-{line}"),
            Some(other) => {
                problems.push(format!(
                    "{file}:{line}: /id must be a string or a number, not {other}"
                ));
                continue;
            }
        };
        let mut row = Row::blank(id, &file, line);
        for (k, v) in m {
            match (k.as_str(), v) {
                ("input", Value::String(s)) => row.input = Some(s),
                ("input", _) => problems.push(format!("{}: /input must be a string", row.place())),
                ("vars", Value::Object(vars)) => row.vars = vars,
                ("vars", _) => problems.push(format!("{}: /vars must be an object", row.place())),
                ("expected", v) => match expected_from(v) {
                    Ok(e) => row.expected = Some(e),
                    Err(msg) => problems.push(format!("{}: /expected {msg}", row.place())),
                },
                (other, _) => problems.push(format!(
                    "{}: /{} is not a row key (a row has id, input, vars and expected; template variables go under `vars`)",
                    row.place(),
                    escape(other)
                )),
            }
        }
        each(row)?;
    }
    Ok(())
}

fn expected_from(v: Value) -> std::result::Result<Expected, String> {
    match v {
        Value::Array(items) => Ok(Expected::All(items)),
        Value::Object(by) => by
            .into_iter()
            .map(|(k, v)| match v {
                Value::Array(items) => Ok((k, items)),
                _ => Err(format!("/{}: must be an array of records", escape(&k))),
            })
            .collect::<std::result::Result<_, _>>()
            .map(Expected::ByPrompt),
        _ => Err(
            "must be an array of records, or an object of such arrays keyed by prompt id".into(),
        ),
    }
}

/// The bytes a CSV reader may read past the start of the record it is in: the row limit, plus
/// what its buffer reads ahead.
const CSV_READ_AHEAD: u64 = 64 * 1024;

/// A file that refuses to be read past a moving bound: the CSV reader holds a whole record in
/// memory, so without it one 1 GB quoted cell (or a link to `/dev/zero`) would be read whole
/// before its size could be checked.
struct BoundedReads<R> {
    inner: R,
    read: u64,
    bound: std::rc::Rc<std::cell::Cell<u64>>,
}

/// The marker of a read refused by [`BoundedReads`].
#[derive(Debug)]
struct PastTheRowLimit;

impl std::fmt::Display for PastTheRowLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a record passes the row limit")
    }
}

impl std::error::Error for PastTheRowLimit {}

impl<R: Read> Read for BoundedReads<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let room = self.bound.get().saturating_sub(self.read);
        if room == 0 {
            return Err(std::io::Error::other(PastTheRowLimit));
        }
        let n = buf.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let got = self.inner.read(&mut buf[..n])?;
        self.read += got as u64;
        Ok(got)
    }
}

fn load_csv<E: From<Error>>(
    path: &Path,
    problems: &mut Vec<String>,
    each: &mut dyn FnMut(Row) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let file = path.display().to_string();
    let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let max = limits::max_row_bytes();
    let bound = std::rc::Rc::new(std::cell::Cell::new(max + CSV_READ_AHEAD));
    let f = BoundedReads {
        inner: f,
        read: 0,
        bound: bound.clone(),
    };
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(f);
    let headers = match reader.headers() {
        Ok(h) => h.clone(),
        Err(e) => {
            problems.push(format!("{file}: the header row: {e}"));
            return Ok(());
        }
    };
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map_or(0, |p| p.line() as usize);
                if let csv::ErrorKind::Io(io) = e.kind()
                    && io
                        .get_ref()
                        .is_some_and(|inner| inner.is::<PastTheRowLimit>())
                {
                    // Where the record that passed the limit starts: the line after the last
                    // one read.
                    let line = reader.position().line() as usize;
                    problems.push(format!(
                        "{file}:{line}: the row passes the limit of {} MiB (KERF_MAX_ROW_MIB); the rest of the file is not read",
                        max >> 20
                    ));
                    break;
                }
                problems.push(format!("{file}:{line}: {e}"));
                if matches!(
                    e.kind(),
                    csv::ErrorKind::Io(_) | csv::ErrorKind::Utf8 { .. }
                ) {
                    break;
                }
                continue;
            }
        }
        // The next record may read up to the limit past where this one ended.
        bound.set(reader.position().byte() + max + CSV_READ_AHEAD);
        let line = record.position().map_or(0, |p| p.line() as usize);
        if record.as_slice().len() as u64 > max {
            problems.push(too_large(&file, line, record.as_slice().len() as u64));
            continue;
        }
        let mut row = Row::blank(format!("line-{line}"), &file, line);
        for (name, cell) in headers.iter().zip(record.iter()) {
            match name {
                "id" if !cell.is_empty() => row.id = cell.to_string(),
                "id" => {}
                "input" => row.input = Some(cell.to_string()),
                "expected" if cell.trim().is_empty() => {}
                "expected" => match serde_json::from_str(cell) {
                    Ok(v) => match expected_from(v) {
                        Ok(e) => row.expected = Some(e),
                        Err(msg) => {
                            problems.push(format!("{}: column `expected` {msg}", row.place()))
                        }
                    },
                    Err(e) => problems.push(format!(
                        "{}: column `expected`: not valid JSON (column {}): {}",
                        row.place(),
                        e.column(),
                        strip_position(&e.to_string())
                    )),
                },
                var => {
                    let value = if cell.starts_with(['[', '{']) {
                        match serde_json::from_str(cell) {
                            Ok(v) => v,
                            Err(e) => {
                                problems.push(format!(
                                    "{}: column `{}` starts like JSON but is not (column {}): {}",
                                    row.place(),
                                    crate::error::quoted(var),
                                    e.column(),
                                    strip_position(&e.to_string())
                                ));
                                continue;
                            }
                        }
                    } else {
                        Value::String(cell.to_string())
                    };
                    row.vars.insert(var.to_string(), value);
                }
            }
        }
        each(row)?;
    }
    Ok(())
}

/// The variables in `file` (opened, and checked, as `path`).
fn read_vars(
    file: std::fs::File,
    path: &Path,
    problems: &mut Vec<String>,
) -> Result<Map<String, Value>> {
    let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
    let max = limits::max_row_bytes();
    if size > max {
        problems.push(too_large(&path.display().to_string(), 1, size));
        return Ok(Map::new());
    }
    let text = read_opened(file, path)?;
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => {
            problems.push(format!(
                "{}: must be a JSON object of variables",
                path.display()
            ));
            Ok(Map::new())
        }
        Err(e) => {
            problems.push(format!(
                "{}:{}: not valid JSON: {}",
                path.display(),
                e.line(),
                strip_position(&e.to_string())
            ));
            Ok(Map::new())
        }
    }
}

/// The text of `file` (opened as `path`), which must be UTF-8.
fn read_opened(mut file: std::fs::File, path: &Path) -> Result<String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| Error::io(path, e))?;
    String::from_utf8(bytes).map_err(|e| Error::Utf8 {
        place: path.display().to_string(),
        offset: e.utf8_error().valid_up_to(),
    })
}

/// Open `path` (in the dataset folder whose real path is `base`) once, and check the file that
/// was opened — not the path again, which could have been swapped for a link in between: a
/// regular file whose real path (the open file's own, on Linux) stays inside the folder. A link
/// out of it (a checkout or an archive can carry one to `/proc/self/environ`, the environment's
/// keys), a device or a FIFO is a problem naming it, and is never read. Opened without
/// blocking, so a FIFO cannot hold the eval up.
fn open_inside(base: &Path, path: &Path, problems: &mut Vec<String>) -> Option<std::fs::File> {
    let opened = open_nonblocking(path).ok().filter(|f| {
        f.metadata().is_ok_and(|m| m.is_file())
            && real_path(f, path).is_some_and(|real| real.starts_with(base))
    });
    if opened.is_none() {
        problems.push(format!(
            "{}: not a regular file inside the dataset folder (a link out of it, or a device); refused unread",
            path.display()
        ));
    }
    opened
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// Where the open file `f` really is: the kernel's own answer on Linux (`/proc/self/fd`), else
/// `path` resolved.
fn real_path(f: &std::fs::File, path: &Path) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(real) = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd())) {
            return Some(real);
        }
    }
    let _ = f;
    path.canonicalize().ok()
}

fn load_folder<E: From<Error>>(
    dir: &Path,
    problems: &mut Vec<String>,
    each: &mut dyn FnMut(Row) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let base = dir.canonicalize().map_err(|e| Error::io(dir, e))?;
    let mut docs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    docs.sort();
    // The companions of a document (and the folder's shared variables), when present: each
    // opened once and checked as opened.
    let companion = |path: PathBuf, problems: &mut Vec<String>| {
        let present = std::fs::symlink_metadata(&path).is_ok();
        present
            .then(|| open_inside(&base, &path, problems))
            .flatten()
            .map(|file| (file, path))
    };
    let shared = match companion(dir.join("vars.json"), problems) {
        Some((file, p)) => read_vars(file, &p, problems)?,
        None => Map::new(),
    };
    let max = limits::max_row_bytes();
    for doc in docs {
        let Some(file) = open_inside(&base, &doc, problems) else {
            continue;
        };
        let id = doc
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let place = doc.display().to_string();
        let size = file.metadata().map_err(|e| Error::io(&doc, e))?.len();
        if size > max {
            problems.push(too_large(&place, 1, size));
            continue;
        }
        let mut vars = shared.clone();
        if let Some((f, p)) = companion(dir.join(format!("{id}.vars.json")), problems) {
            vars.extend(read_vars(f, &p, problems)?);
        }
        let expected = match companion(dir.join(format!("{id}.expected.jsonl")), problems) {
            Some((f, expected_path)) => {
                let (records, lines) = records_of(bounded_lines_of(f, &expected_path), problems)?
                    .into_iter()
                    .unzip();
                Some((
                    Expected::All(records),
                    (expected_path.display().to_string(), lines),
                ))
            }
            None => None,
        };
        let (expected, expected_lines) = expected.unzip();
        each(Row {
            id,
            line: 1,
            input: Some(read_opened(file, &doc)?),
            vars,
            expected,
            expected_lines,
            file: place,
            held: held::Held::new(),
        })?;
    }
    Ok(())
}

/// The records of a JSONL file with the line of each; a line that is not JSON, or too large, is
/// a problem naming the file and line.
fn records_in(path: &Path, problems: &mut Vec<String>) -> Result<Vec<(Value, usize)>> {
    records_of(bounded_lines(path)?, problems)
}

/// [`records_in`] over lines already opened.
fn records_of(lines: BoundedLines, problems: &mut Vec<String>) -> Result<Vec<(Value, usize)>> {
    let place = lines.path.display().to_string();
    let mut records = Vec::new();
    for read in lines {
        let (line, text) = read?;
        match text {
            Err(size) => problems.push(too_large(&place, line, size)),
            Ok(t) if t.trim().is_empty() => {}
            Ok(t) => match serde_json::from_str(&t) {
                Ok(v) => records.push((v, line)),
                Err(e) => problems.push(format!(
                    "{place}:{line}: not valid JSON (column {}): {}",
                    e.column(),
                    strip_position(&e.to_string())
                )),
            },
        }
    }
    Ok(records)
}

/// The records of one document, one JSON object per line (`kerf score`'s files): every line
/// that is not a JSON object is named, and with `prompt`, every record that fails its record
/// schema (by line and JSON pointer; the records are expected ones, `aliases` aside).
pub fn read_records(path: &Path, prompt: Option<&Prompt>) -> Result<Vec<Value>> {
    let mut problems = Vec::new();
    let (records, lines): (Vec<Value>, Vec<usize>) =
        records_in(path, &mut problems)?.into_iter().unzip();
    let place = path.display().to_string();
    let at = |i: usize, sub: &str| {
        let sep = if sub.is_empty() { "" } else { ": " };
        format!("{place}:{}{sep}{sub}", lines[i])
    };
    match prompt {
        Some(p) => check_records(p, &records, &at, &mut problems),
        None => {
            for (i, r) in records.iter().enumerate() {
                if !r.is_object() {
                    problems.push(format!("{}: a record must be a JSON object", at(i, "")));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(records)
    } else {
        Err(Error::Dataset { place, problems })
    }
}

/// Problems of `records` (expected records of prompt `p`) against its record schema: each a
/// JSON pointer under `base` at `place`, for `kerf score` and [`check`] alike.
pub fn check_records(
    p: &Prompt,
    records: &[Value],
    at: &dyn Fn(usize, &str) -> String,
    problems: &mut Vec<String>,
) {
    for (i, r) in records.iter().enumerate() {
        if !r.is_object() {
            problems.push(format!("{}: a record must be a JSON object", at(i, "")));
            continue;
        }
        if let Some(a) = r.get("aliases")
            && !a.as_object().is_some_and(|m| {
                m.values().all(|v| {
                    v.as_array()
                        .is_some_and(|xs| xs.iter().all(Value::is_string))
                })
            })
        {
            problems.push(format!(
                "{}: must map field names to arrays of other names",
                at(i, "/aliases")
            ));
        }
        let Some(schema) = p.parser.item_schema() else {
            continue;
        };
        if let Err(violations) = schema.validate(&without_aliases(r)) {
            for v in violations {
                problems.push(format!(
                    "{}: fails prompt `{}`'s record schema: {}",
                    at(i, &v.pointer),
                    p.id(),
                    v.message
                ));
            }
        }
    }
}

/// Hold every row to the prompts it will run with: each variable some prompt reads, none a
/// prompt needs missing, each expected record valid against that prompt's record schema (its
/// `aliases` aside). Returns the dataset's error listing every problem, or `Ok`.
pub fn check(dataset: &Dataset, prompts: &[&Prompt]) -> Result<()> {
    let checker = Checker::new(prompts);
    let mut problems = Vec::new();
    for row in &dataset.rows {
        checker.row(row, &mut problems);
    }
    problems_in(&dataset.path, problems)
}

/// The dataset's error listing `problems` (the error [`check`] returns), or `Ok` when there are
/// none.
pub fn problems_in(path: &Path, problems: Vec<String>) -> Result<()> {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Error::Dataset {
            place: path.display().to_string(),
            problems,
        })
    }
}

/// What [`check`] holds a row to, found once for the prompts, so rows can be checked one at a
/// time as they are read.
pub struct Checker<'p> {
    prompts: &'p [&'p Prompt],
    /// Each prompt's variables (each call walks its templates).
    needs: Vec<Vec<String>>,
    /// Every variable some prompt reads.
    read: BTreeSet<String>,
    /// Per prompt, the variables set for all its rows (`kerf eval --var`, the window's form):
    /// a row need not give them.
    set: Vec<BTreeSet<String>>,
}

impl<'p> Checker<'p> {
    pub fn new(prompts: &'p [&'p Prompt]) -> Checker<'p> {
        let needs: Vec<Vec<String>> = prompts.iter().map(|p| p.input_variables()).collect();
        let read: BTreeSet<String> = prompts
            .iter()
            .zip(&needs)
            .flat_map(|(p, needs)| {
                needs
                    .iter()
                    .cloned()
                    .chain(p.file.terms.keys().cloned())
                    .chain([p.file.input_variable().to_string()])
            })
            .collect();
        Checker {
            prompts,
            needs,
            read,
            set: Vec::new(),
        }
    }

    /// The checker, told which variables are set for every row of each prompt (in the prompts'
    /// order): a row that leaves one out is not missing it.
    pub fn with_set(mut self, set: Vec<BTreeSet<String>>) -> Checker<'p> {
        self.set = set;
        self
    }

    /// Add `row`'s problems to `problems`, in the order [`check`] lists them.
    pub fn row(&self, row: &Row, problems: &mut Vec<String>) {
        let read = &self.read;
        for k in row.vars.keys() {
            if !read.contains(k) {
                problems.push(format!(
                    "{}: /vars/{}: unknown variable (the prompts read: {})",
                    row.place(),
                    escape(k),
                    read.iter()
                        .map(|v| format!("`{v}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        for (i, (p, needs)) in self.prompts.iter().zip(&self.needs).enumerate() {
            let supplied = row.vars_for(p);
            let set = self.set.get(i);
            for v in needs {
                if !supplied.contains_key(v) && !set.is_some_and(|s| s.contains(v)) {
                    let how = if v.as_str() == p.file.input_variable() {
                        "give the row an `input`".to_string()
                    } else {
                        "add it under `vars`, or set one value for every row with `--var` or Evaluate's variable form".to_string()
                    };
                    problems.push(format!(
                        "{}: missing variable `{v}`, which prompt `{}` reads ({how})",
                        row.place(),
                        p.id()
                    ));
                }
            }
            let Some((records, pointer)) = row.expected_for(p) else {
                continue;
            };
            let at = |i: usize, sub: &str| {
                // The place, and the pointer of the record within it.
                let (place, base) = match &row.expected_lines {
                    Some((file, lines)) => (
                        format!(
                            "{file}:{}, row `{}`",
                            lines[i],
                            crate::error::quoted(&row.id)
                        ),
                        String::new(),
                    ),
                    None => (row.place(), format!("{pointer}/{i}")),
                };
                let full = format!("{base}{sub}");
                if full.is_empty() {
                    place
                } else {
                    format!("{place}: {full}")
                }
            };
            check_records(p, records, &at, problems);
        }
    }
}
