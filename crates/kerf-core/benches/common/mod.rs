//! Shared by the benches: the shipped agent-kg-extract union parser and its reply lines.

use kerf_core::{CompiledSchema, Parser, ResponseType};
use serde_json::Value;

/// A JSONL parser validating against the shipped `agent-kg-extract` oneOf schema.
pub fn union_parser() -> Parser {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../schemas/agent-kg-extract.schema.json");
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(root).expect("schema")).expect("json");
    Parser::new(ResponseType::Jsonl)
        .with_schema(CompiledSchema::compile(&schema, "bench").expect("compiles"))
}

/// Line `i` of an extraction reply: definitions and relationships alternating.
pub fn union_line(i: usize) -> String {
    if i.is_multiple_of(2) {
        format!(
            "{{\"type\": \"definition\", \"entity\": \"entity {i}\", \"definition\": \"A molecule or process described in paragraph {i} of the source text\"}}"
        )
    } else {
        format!(
            "{{\"type\": \"relationship\", \"subject\": \"entity {i}\", \"predicate\": \"located in\", \"object\": \"compartment {}\", \"object-entity\": true}}",
            i % 17
        )
    }
}
