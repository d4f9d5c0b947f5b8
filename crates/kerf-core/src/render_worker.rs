//! Templates render in a worker process with a memory limit, so that no template can take the
//! app or the CLI down with it.
//!
//! Fuel bounds a render's steps, and the output is capped, but a few steps can build a string
//! of gigabytes (`{% set ns.s = ns.s ~ ns.s %}` in a loop doubles it each time) and an allocation
//! that fails aborts the whole process — the window, with the prompt still unsaved. minijinja has
//! no hook on what a render allocates, so the bound is the operating system's: the binaries
//! (`kerf`, the desktop app) call [`set_up`] first thing in `main`, handing it the template
//! engine ([`Engine`]: `template::ENGINE`); from then on every template compile and render is sent to a
//! worker — the same executable started with [`WORKER_ARG`] — whose data segment is limited to
//! `KERF_RENDER_MEMORY_MIB` (`limits::render_memory_bytes`). A worker that dies is reported as
//! the template's `template_render` error, and the next render starts a new one. Compiling goes
//! there too: minijinja folds constant expressions while it compiles (`"x" * 100000000 ~ …`),
//! and a worker that dies compiling is the template's `template_syntax` error.
//!
//! Workers live for many renders (an eval renders every row; starting a process per render
//! would cost more than the render) and are kept in a small pool so that renders of concurrent
//! cells do not wait on each other. Without [`isolate_renders`] (the library's own tests, other
//! embedders), templates render in the calling process. This file carries a template's name,
//! source and context, never a template: the engine is `template.rs`'s, handed in.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// The argument that makes a Kerf executable serve renders on its standard input and output.
pub const WORKER_ARG: &str = "--kerf-render-worker";

/// Workers kept for the next render once a render is done (renders in flight at once beyond
/// this start their own, and stop after).
const IDLE_WORKERS: usize = 4;

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
static IDLE: Mutex<Vec<Worker>> = Mutex::new(Vec::new());

/// A render's text and its warnings.
pub type Rendered = (String, Vec<String>);

/// What a worker does in its own process: the template engine's compile (a template's
/// variables, sorted) and render, by name and source.
#[derive(Clone, Copy)]
pub struct Engine {
    pub compile: fn(&str, &str) -> Result<Vec<String>>,
    pub render: fn(&str, &str, &Map<String, Value>) -> Result<Rendered>,
}

/// First thing in an executable's `main`, with the template engine
/// (`kerf_core::template::ENGINE`): when this process was started as a render worker, serve
/// renders with `engine` and exit; otherwise send this process's renders to workers of this
/// executable. (When the executable cannot be found, renders stay in this process.)
pub fn set_up(engine: Engine) {
    serve_if_worker(engine);
    if let Ok(program) = std::env::current_exe() {
        isolate_renders(program);
    }
}

/// Send every later render to workers started from `program`, an executable whose `main` calls
/// [`set_up`]. The first call wins.
pub fn isolate_renders(program: PathBuf) {
    let _ = PROGRAM.set(program);
}

/// Whether renders go to workers.
pub fn isolated() -> bool {
    PROGRAM.get().is_some()
}

/// What a worker is asked: to compile a template (constant folding happens there) or to
/// render one.
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Request {
    Compile {
        name: String,
        source: String,
    },
    Render {
        name: String,
        source: String,
        ctx: Map<String, Value>,
    },
}

impl Request {
    fn name(&self) -> &str {
        match self {
            Request::Compile { name, .. } | Request::Render { name, .. } => name,
        }
    }

    /// Do it in this process with `engine` (the worker's side).
    fn answer(&self, engine: Engine) -> Reply {
        match self {
            Request::Compile { name, source } => match (engine.compile)(name, source) {
                Ok(variables) => Reply::Compiled { variables },
                Err(e) => Reply::of(Err(e)),
            },
            Request::Render { name, source, ctx } => Reply::of((engine.render)(name, source, ctx)),
        }
    }
}

/// A worker's answer: the render's text and warnings, or its template error.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Compiled {
        variables: Vec<String>,
    },
    Rendered {
        text: String,
        warnings: Vec<String>,
    },
    Syntax {
        line: Option<usize>,
        message: String,
    },
    Undefined {
        line: Option<usize>,
        variable: String,
    },
    Failed {
        line: Option<usize>,
        message: String,
    },
}

impl Reply {
    fn of(result: Result<(String, Vec<String>)>) -> Reply {
        match result {
            Ok((text, warnings)) => Reply::Rendered { text, warnings },
            Err(Error::TemplateSyntax { line, message, .. }) => Reply::Syntax { line, message },
            Err(Error::TemplateUndefined { line, variable, .. }) => {
                Reply::Undefined { line, variable }
            }
            Err(Error::TemplateRender { line, message, .. }) => Reply::Failed { line, message },
            Err(other) => Reply::Failed {
                line: None,
                message: other.to_string(),
            },
        }
    }

    fn into_result(self, name: &str) -> Result<Answer> {
        let name = name.to_string();
        match self {
            Reply::Compiled { variables } => Ok(Answer::Compiled(variables)),
            Reply::Rendered { text, warnings } => Ok(Answer::Rendered(text, warnings)),
            Reply::Syntax { line, message } => Err(Error::TemplateSyntax {
                name,
                line,
                message,
            }),
            Reply::Undefined { line, variable } => Err(Error::TemplateUndefined {
                name,
                line,
                variable,
            }),
            Reply::Failed { line, message } => Err(Error::TemplateRender {
                name,
                line,
                message,
            }),
        }
    }
}

/// When this process was started as a render worker: limit its memory, answer renders until
/// its input closes, and exit. Otherwise return at once.
fn serve_if_worker(engine: Engine) {
    if std::env::args_os().nth(1).as_deref() != Some(WORKER_ARG.as_ref()) {
        return;
    }
    limit_memory();
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    for line in stdin.lines() {
        let Ok(line) = line else { break };
        let reply = match serde_json::from_str::<Request>(&line) {
            Ok(req) => {
                // A panic inside the engine is the template's failure, not the worker's end.
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| req.answer(engine)))
                    .unwrap_or_else(|_| {
                        Reply::of(Err(Error::TemplateRender {
                            name: req.name().to_string(),
                            line: None,
                            message: "the template engine failed on this template".into(),
                        }))
                    })
            }
            Err(e) => Reply::Failed {
                line: None,
                message: format!("the render worker could not read its request: {e}"),
            },
        };
        let written = serde_json::to_writer(&mut out, &reply)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if written.is_err() {
            break;
        }
    }
    std::process::exit(0);
}

/// The worker's data segment (heap and private mappings, which is what a render builds) is
/// limited to what it holds on starting plus the render budget; a render past it fails its
/// allocation and ends the worker, not the app. (What it holds on starting differs by
/// executable: the desktop app's libraries bring ~180 MB of data mappings in a debug build,
/// the CLI far less.) No core file: a template that asked for too much is no crash to keep.
#[cfg(unix)]
fn limit_memory() {
    use rustix::process::{Resource, Rlimit, setrlimit};
    let bytes = crate::limits::render_memory_bytes().saturating_add(data_now());
    let _ = setrlimit(
        Resource::Core,
        Rlimit {
            current: Some(0),
            maximum: Some(0),
        },
    );
    let _ = setrlimit(
        Resource::Data,
        Rlimit {
            current: Some(bytes),
            maximum: Some(bytes),
        },
    );
}

/// The process's data segment now (`VmData`, Linux); 0 where it cannot be read.
#[cfg(unix)]
fn data_now() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmData:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib.saturating_mul(1024))
}

/// Elsewhere the worker still keeps a failed allocation out of the app; its size is not bound.
#[cfg(not(unix))]
fn limit_memory() {}

/// A running worker and its pipes.
struct Worker {
    child: Child,
    to: BufWriter<ChildStdin>,
    from: BufReader<ChildStdout>,
}

impl Worker {
    fn start(program: &PathBuf) -> std::io::Result<Worker> {
        let mut child = Command::new(program)
            .arg(WORKER_ARG)
            // Kerf's executables allocate with mimalloc, which reserves a gigabyte of address
            // space up front; reserved before the limit is set, it would count in the data
            // segment the limit starts from, and a render could fill it all. None reserved:
            // every segment it takes counts against the limit.
            .env("MIMALLOC_ARENA_RESERVE", "0")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // What a dying worker prints ("memory allocation of … failed") is said better by
            // the error below.
            .stderr(Stdio::null())
            .spawn()?;
        let (Some(to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(std::io::Error::other("the worker has no pipes"));
        };
        Ok(Worker {
            child,
            to: BufWriter::new(to),
            from: BufReader::new(from),
        })
    }

    /// Send one request and read its reply; `None` when the worker died doing it.
    fn ask(&mut self, request: &[u8]) -> Asked {
        if self
            .to
            .write_all(request)
            .and_then(|()| self.to.flush())
            .is_err()
        {
            return Asked::NotSent;
        }
        let mut line = String::new();
        match self.from.read_line(&mut line) {
            Ok(n) if n > 0 => serde_json::from_str(&line).map_or(Asked::Died, Asked::Reply),
            _ => Asked::Died,
        }
    }

    /// Whether the process has ended (an idle worker killed from outside, say).
    fn ended(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }
}

/// How a request to a worker went.
enum Asked {
    Reply(Reply),
    /// The worker could not take the request: it had ended before it was sent.
    NotSent,
    /// The worker ended while it had the request.
    Died,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a worker answered.
enum Answer {
    Compiled(Vec<String>),
    Rendered(String, Vec<String>),
}

/// Compile `source` (named `name`) in a worker, when renders were isolated: its top-level
/// variables, sorted; `None` otherwise (the caller compiles in its own process).
pub(crate) fn compile(name: &str, source: &str) -> Option<Result<Vec<String>>> {
    let program = PROGRAM.get()?;
    let request = Request::Compile {
        name: name.into(),
        source: source.into(),
    };
    Some(
        ask_worker(program, &request).and_then(|answer| match answer {
            Answer::Compiled(variables) => Ok(variables),
            Answer::Rendered(..) => Err(Error::TemplateSyntax {
                name: name.into(),
                line: None,
                message: "the template's worker answered a compile with a render".into(),
            }),
        }),
    )
}

/// Render `source` (named `name`) with `ctx` in a worker, when renders were isolated;
/// `None` otherwise (the caller renders in its own process).
pub(crate) fn render(
    name: &str,
    source: &str,
    ctx: &Map<String, Value>,
) -> Option<Result<(String, Vec<String>)>> {
    let program = PROGRAM.get()?;
    Some(render_in_worker(program, name, source, ctx))
}

fn render_in_worker(
    program: &PathBuf,
    name: &str,
    source: &str,
    ctx: &Map<String, Value>,
) -> Result<(String, Vec<String>)> {
    let request = Request::Render {
        name: name.into(),
        source: source.into(),
        ctx: ctx.clone(),
    };
    ask_worker(program, &request).and_then(|answer| match answer {
        Answer::Rendered(text, warnings) => Ok((text, warnings)),
        Answer::Compiled(_) => Err(Error::TemplateRender {
            name: name.into(),
            line: None,
            message: "the template's worker answered a render with a compile".into(),
        }),
    })
}

/// Send `request` to an idle worker (or a new one) and read its answer. A worker that dies
/// doing it met its memory limit: the error says so, as a syntax error of a compile (the
/// template is refused as it stands) or a failure of a render.
fn ask_worker(program: &PathBuf, request: &Request) -> Result<Answer> {
    let name = request.name();
    let compiling = matches!(request, Request::Compile { .. });
    let failed = |message: String| {
        if compiling {
            Error::TemplateSyntax {
                name: name.into(),
                line: None,
                message,
            }
        } else {
            Error::TemplateRender {
                name: name.into(),
                line: None,
                message,
            }
        }
    };
    let mut line = serde_json::to_vec(request)
        .map_err(|e| failed(format!("the template could not be sent to its worker: {e}")))?;
    line.push(b'\n');
    let start = || {
        Worker::start(program).map_err(|e| {
            failed(format!(
                "the render worker ({}) could not start: {e}",
                program.display()
            ))
        })
    };
    // An idle worker that ended while it waited (killed from outside: the OOM killer, a person)
    // says nothing about this template: a fresh worker takes the request instead.
    let idle = IDLE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop()
        .and_then(|mut w| (!w.ended()).then_some(w));
    let (mut worker, reused) = match idle {
        Some(w) => (w, true),
        None => (start()?, false),
    };
    let mut asked = worker.ask(&line);
    if reused && matches!(asked, Asked::NotSent) {
        worker = start()?;
        asked = worker.ask(&line);
    }
    match asked {
        Asked::Reply(reply) => {
            let mut idle = IDLE.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < IDLE_WORKERS {
                idle.push(worker);
            }
            reply.into_result(name)
        }
        Asked::NotSent | Asked::Died => {
            let status = worker.child.wait().ok();
            Err(failed(died(compiling, status)))
        }
    }
}

/// What a worker's end says about the template: a worker is only ever stopped by its memory
/// limit (failed allocations abort it; the kernel may kill it first). While compiling, only
/// constant folding allocates at that scale.
fn died(compiling: bool, status: Option<std::process::ExitStatus>) -> String {
    let limit = crate::limits::render_memory_bytes() >> 20;
    let how = status.map_or_else(|| "ended".to_string(), |s| s.to_string());
    if compiling {
        format!(
            "compiling it built more than {limit} MiB (KERF_RENDER_MEMORY_MIB) and was stopped; \
             a constant expression that builds a huge value, such as `\"x\" * 100000000`? \
             (the compiling process {how})"
        )
    } else {
        format!(
            "the render built more than {limit} MiB (KERF_RENDER_MEMORY_MIB) and was stopped; \
             a loop that grows a string? (the render's process {how})"
        )
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A worker killed from outside while it waits in the pool says nothing about the next
    /// template: a fresh worker renders it (it was once reported as a memory limit reached).
    #[test]
    fn an_idle_worker_killed_from_outside_is_replaced_not_blamed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let reply = serde_json::to_string(&Reply::Rendered {
            text: "rendered".into(),
            warnings: Vec::new(),
        })
        .unwrap();
        // A stand-in worker: one reply line per request line.
        let script = dir.path().join("worker.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\nwhile read -r line; do printf '%s\\n' '{reply}'; done\n"),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ctx = Map::new();
        let first = render_in_worker(&script, "t", "x", &ctx).unwrap();
        assert_eq!(first.0, "rendered");
        let pid = {
            let idle = IDLE.lock().unwrap();
            idle.last().unwrap().child.id()
        };
        let killed = Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        // Dead before the next render asks (a zombie until it is reaped): however slow or busy
        // the machine, the test waits for the fact, not for a time.
        let stat = format!("/proc/{pid}/stat");
        while std::fs::read_to_string(&stat).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        }) {
            std::thread::yield_now();
        }
        let again = render_in_worker(&script, "t", "x", &ctx).unwrap();
        assert_eq!(again.0, "rendered");
    }
}
