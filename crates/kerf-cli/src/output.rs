//! Reading inputs and writing outputs the same way in every command.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::Result;
use serde_json::{Map, Value};

/// Write formatted text to standard output. When the reader has gone away (`kerf … | head`),
/// stop quietly with status 0 instead of panicking the way `println!` does. On a terminal,
/// control characters other than newline and tab are shown escaped (`\x1b`): a model's reply or
/// a prompt file someone sent could otherwise drive the terminal (move the cursor, rewrite what
/// is on screen, set the title). Pipes and files get the bytes as they are.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::IsTerminal;
    static TERMINAL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let terminal = *TERMINAL.get_or_init(|| std::io::stdout().is_terminal());
    let mut out = std::io::stdout().lock();
    let written = if terminal {
        out.write_all(escape_controls(&args.to_string()).as_bytes())
    } else {
        out.write_fmt(args)
    };
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        crate::errln!("kerf: error[io]: writing to standard output: {e}");
        std::process::exit(2);
    }
}

/// Write a line to standard error with every control character but newline and tab escaped,
/// on every stream: what Kerf says there quotes what came from outside (a server's error body, a
/// dataset's row id, a prompt's name), and a terminal — or a CI log viewer — would obey an
/// escape sequence in it (set the title, write the clipboard). Errors writing it are ignored:
/// there is nowhere left to report them.
pub fn write_stderr(args: std::fmt::Arguments<'_>) {
    let text = args.to_string();
    let _ = writeln!(std::io::stderr().lock(), "{}", escape_controls(&text));
}

/// `eprintln!` with the outside's control characters escaped (see [`write_stderr`]).
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => { $crate::output::write_stderr(format_args!($($t)*)) };
}

/// `text` with every control character but newline and tab written as an escape.
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            // `is_control` is Unicode's Cc: C0, DEL and C1, all below U+0100.
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// `println!` that survives a closed pipe (see [`write_stdout`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::output::write_stdout(format_args!("\n")) };
    ($($t:tt)*) => { $crate::output::write_stdout(format_args!("{}\n", format_args!($($t)*))) };
}

/// `print!` that survives a closed pipe (see [`write_stdout`]).
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::output::write_stdout(format_args!($($t)*)) };
}

/// Print one JSON value on standard output (pretty, newline-terminated).
pub fn print_json(value: &Value) {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    write_stdout(format_args!("{text}"));
}

/// [`print_json`] for anything serialisable, written as it is serialised: the same bytes,
/// without building the value or its text first (a parse report of millions of objects would
/// otherwise be held three times over: as the report, as a `Value`, as one string).
pub fn print_json_streamed<T: serde::Serialize + ?Sized>(value: &T) {
    write_streamed(|out| {
        serde_json::to_writer_pretty(&mut *out, value)?;
        out.write_all(b"\n")
    });
}

/// Standard output, buffered and escaped on a terminal as [`write_stdout`] writes it, given to
/// `write`; a closed pipe ends the process quietly, any other error with status 2.
pub fn write_streamed(write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) {
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    let mut out = Streamed {
        // Written a megabyte at a time: 10 MB of chunks into a file took a third less time
        // than in 64 KB writes (fewer, larger page-cache folios). Memory is only taken as
        // it is written into, so a short output costs no more.
        out: std::io::BufWriter::with_capacity(1 << 20, stdout.lock()),
        terminal,
        carry: Vec::new(),
    };
    let written = write(&mut out).and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        crate::errln!("kerf: error[io]: writing to standard output: {e}");
        std::process::exit(2);
    }
}

/// Standard output as [`write_stdout`] writes it (control characters escaped on a terminal),
/// taking bytes: a character split between two writes is held until it is whole.
struct Streamed<W: Write> {
    out: W,
    terminal: bool,
    carry: Vec<u8>,
}

impl<W: Write> Write for Streamed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.terminal {
            return self.out.write(buf);
        }
        self.carry.extend_from_slice(buf);
        let whole = match std::str::from_utf8(&self.carry) {
            Ok(_) => self.carry.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            // Not UTF-8 (serde_json writes only UTF-8): passed on as it is.
            Err(_) => self.carry.len(),
        };
        let text = String::from_utf8_lossy(&self.carry[..whole]).into_owned();
        self.out.write_all(escape_controls(&text).as_bytes())?;
        self.carry.drain(..whole);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.carry.is_empty() {
            let rest = std::mem::take(&mut self.carry);
            self.out.write_all(&rest)?;
        }
        self.out.flush()
    }
}

/// Read a text file, or standard input for `-`. Invalid UTF-8 is an error naming the place.
pub fn read_input(path: &Path) -> Result<String> {
    let bytes = read_bytes(path)?;
    String::from_utf8(bytes).map_err(|e| {
        kerf_core::Error::Utf8 {
            place: place(path),
            offset: e.utf8_error().valid_up_to(),
        }
        .into()
    })
}

/// Read a reply (a file, or standard input for `-`): a last character cut short is a cut reply,
/// invalid UTF-8 anywhere else an error naming the place and offset (`kerf_core::error::decode_reply`).
pub fn read_reply(path: &Path) -> Result<kerf_core::error::ReplyText> {
    Ok(kerf_core::error::decode_reply(
        read_bytes(path)?,
        &place(path),
    )?)
}

/// How a path given on the command line is named in messages: `<stdin>` for `-`.
pub fn place(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| kerf_core::Error::io("<stdin>", e))?;
        return Ok(bytes);
    }
    std::fs::read(path).map_err(|e| kerf_core::Error::io(path, e).into())
}

/// Read a JSON file (or `-`), with errors that name the file, line and column.
pub fn read_json(path: &Path) -> Result<Value> {
    let text = read_input(path)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    serde_json::from_str(text)
        .map_err(|e| kerf_core::Error::json(&path.display().to_string(), &e).into())
}

/// `--var k=v` pairs as a variables map.
pub fn vars(specs: &[String]) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    for s in specs {
        let (k, v) = kerf_core::template::parse_var(s)?;
        out.insert(k, v);
    }
    Ok(out)
}

/// Write `text` to `path` (creating parent folders): in full or not at all (a temporary file
/// beside it, synced, then renamed), with errors that name the file.
pub fn write_file(path: &Path, text: &str) -> Result<()> {
    Ok(kerf_core::files::write_atomically(path, text.as_bytes())?)
}

/// Where a long output goes piece by piece: a file (complete or absent, see
/// [`kerf_core::files::AtomicFile`]) or standard output (as [`write_stdout`] writes it).
pub enum Sink {
    File(kerf_core::files::AtomicFile),
    Stdout,
}

impl Sink {
    pub fn to(path: Option<&Path>) -> Result<Sink> {
        Ok(match path {
            Some(p) => Sink::File(kerf_core::files::AtomicFile::create(p)?),
            None => Sink::Stdout,
        })
    }

    pub fn put(&mut self, text: &str) -> Result<()> {
        match self {
            Sink::File(f) => f.write_all(text.as_bytes())?,
            Sink::Stdout => write_stdout(format_args!("{text}")),
        }
        Ok(())
    }

    /// Finish: a file is put in place.
    pub fn finish(self) -> Result<()> {
        if let Sink::File(f) = self {
            f.commit()?;
        }
        Ok(())
    }
}

/// One line of compact JSON, cut to `max` characters for tables.
pub fn compact(v: &Value, max: usize) -> String {
    shorten(v.to_string(), max)
}

/// `s` cut to `max` characters (the last one an ellipsis) when longer.
pub fn shorten(s: String, max: usize) -> String {
    if s.chars().count() <= max {
        s
    } else {
        format!(
            "{}…",
            s.chars().take(max.saturating_sub(1)).collect::<String>()
        )
    }
}

/// Print warnings on standard error.
pub fn warn_all(warnings: &[String]) {
    for w in warnings {
        crate::errln!("kerf: warning: {w}");
    }
}

/// "{n} dropped (1 schema, 1 truncated){cut}" — how every command sums up a parse report's drops
/// after its object count; `cut` is appended when the reply was cut off.
pub fn dropped_phrase(r: &kerf_core::ParseReport, cut: &str) -> String {
    let drops = r.drop_summary();
    format!(
        "{} dropped{}{}",
        r.dropped.len(),
        if drops.is_empty() {
            String::new()
        } else {
            format!(" ({drops})")
        },
        if r.truncated { cut } else { "" }
    )
}

/// One line per dropped piece: its line, kind and why.
pub fn print_drops(r: &kerf_core::ParseReport, indent: &str) {
    for d in &r.dropped {
        crate::outln!(
            "{indent}line {:>4}  {:<13} {}",
            d.line,
            d.kind.as_str(),
            d.detail
        );
    }
}
