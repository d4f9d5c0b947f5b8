// Shared by the fuzz targets: the parsers under test and report invariants.
#![allow(dead_code)]

use kerf_core::prompt::DelimiterPreset;
use kerf_core::{CompiledSchema, DelimitedFormat, ParseReport, Parser, ResponseType};

pub fn union_schema() -> serde_json::Value {
    serde_json::json!({"oneOf": [
        {"type": "object", "properties": {"type": {"const": "definition"}, "entity": {"type": "string"}, "definition": {"type": "string"}}, "required": ["type", "entity", "definition"]},
        {"type": "object", "properties": {"type": {"const": "relationship"}, "subject": {"type": "string"}, "object-entity": {"type": "boolean"}}, "required": ["type", "subject"]}
    ]})
}

/// Every parser configuration worth fuzzing, selected by one byte. Built once per process:
/// compiling schemas on every input would cost more than the parsing under test.
pub fn parser(selector: u8) -> &'static Parser {
    static PARSERS: std::sync::LazyLock<Vec<Parser>> = std::sync::LazyLock::new(|| (0..8).map(build).collect());
    &PARSERS[(selector % 8) as usize]
}

fn build(selector: u8) -> Parser {
    let schema = || CompiledSchema::compile(&union_schema(), "fuzz").expect("schema");
    let array = || CompiledSchema::compile(&serde_json::json!({"type": "array", "items": union_schema()}), "fuzz").expect("schema");
    match selector % 8 {
        0 => Parser::new(ResponseType::Jsonl),
        1 => Parser::new(ResponseType::Jsonl).with_schema(schema()),
        2 => Parser::new(ResponseType::Json),
        3 => Parser::new(ResponseType::Json).with_schema(array()),
        4 => Parser::new(ResponseType::Json).with_salvage(true),
        5 => Parser::new(ResponseType::Json).with_schema(array()).with_salvage(true),
        6 => Parser::new(ResponseType::Delimited),
        _ => Parser::new(ResponseType::Delimited).with_delimiters(DelimitedFormat::preset(DelimiterPreset::LightragLegacy)),
    }
}

/// What must hold of any report.
pub fn check_report(text: &str, r: &ParseReport) {
    assert_eq!(r.objects.len(), r.ends.len());
    let lines = text.split('\n').count();
    for d in &r.dropped {
        assert!(d.line >= 1 && d.line <= lines, "drop line {} of {lines}", d.line);
    }
    for e in &r.ends {
        assert!(e <= text.len());
    }
}
