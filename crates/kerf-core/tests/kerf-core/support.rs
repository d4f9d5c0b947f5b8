//! Shared helpers: the schemas the TrustGraph spec uses, and short ways to parse.

use kerf_core::{CompiledSchema, ParseReport, Parser, ResponseType};
use serde_json::{Map, Value, json};

/// The repository root (tests read shipped prompts and schemas).
pub fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

/// The spec's definition schema.
pub fn definition_schema() -> Value {
    json!({"type": "object", "properties": {"entity": {"type": "string"}, "definition": {"type": "string"}}, "required": ["entity", "definition"]})
}

/// The spec's definition/relationship discriminated union.
pub fn union_schema() -> Value {
    json!({"oneOf": [
        {"type": "object", "properties": {"type": {"const": "definition"}, "entity": {"type": "string"}, "definition": {"type": "string"}}, "required": ["type", "entity", "definition"]},
        {"type": "object", "properties": {"type": {"const": "relationship"}, "subject": {"type": "string"}, "predicate": {"type": "string"}, "object": {"type": "string"}, "object-entity": {"type": "boolean"}}, "required": ["type", "subject", "predicate", "object", "object-entity"]}
    ]})
}

pub fn parser(t: ResponseType, schema: Option<Value>) -> Parser {
    let p = Parser::new(t);
    match schema {
        Some(s) => {
            p.with_schema(CompiledSchema::compile(&s, "test schema").expect("schema compiles"))
        }
        None => p,
    }
}

pub fn parse(t: ResponseType, schema: Option<Value>, text: &str) -> ParseReport {
    parser(t, schema).parse(text, &Map::new())
}

/// `(line, kind)` of every drop, for compact assertions.
pub fn drops(r: &ParseReport) -> Vec<(usize, &'static str)> {
    r.dropped
        .iter()
        .map(|d| (d.line, d.kind.as_str()))
        .collect()
}

pub fn def(entity: &str, definition: &str) -> Value {
    json!({"entity": entity, "definition": definition})
}

/// `f`, run on another thread, with `limit` as a watchdog: a hang fails the test (naming `what`)
/// instead of holding the suite. Not a speed test: `limit` is far above what the work takes on
/// the slowest, busiest machine.
pub fn within<T: Send + 'static>(
    limit: std::time::Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no end in {limit:?}"),
        // The work panicked: its message is already on stderr.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}
