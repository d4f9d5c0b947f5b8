//! The grammars a schema constrains decoding with, as text: llguidance's Lark (what the engine
//! runs) and llama.cpp's GBNF (its fallback, and what a llama.cpp server's `grammar` field takes).
//! JSONL is one or more lines, each one schema-valid object kept on one line.

use serde_json::{Value, json};

use kerf_llm::Result;

/// llguidance's Lark grammar for `schema`: the whole reply (`jsonl = false`), or JSONL lines.
pub fn lark(schema: &Value, jsonl: bool) -> String {
    if !jsonl {
        return format!("start: %json {schema}\n");
    }
    let mut item = schema.clone();
    if let Value::Object(m) = &mut item {
        m.insert("x-guidance".into(), json!({"whitespace_flexible": false}));
    }
    format!("start: (item \"\\n\")+\nitem: %json {item}\n")
}

/// llama.cpp's GBNF for `schema` (its own converter): the whole reply, or JSONL lines (the
/// converter's value grammar as `item`, kept to one line). Needs the engine.
#[cfg(feature = "engine")]
pub fn gbnf(schema: &Value, jsonl: bool) -> Result<String> {
    let g = llama_cpp_2::json_schema_to_grammar(&schema.to_string()).map_err(|e| {
        kerf_llm::Error::Constraint(format!(
            "llama.cpp cannot turn the schema into a grammar: {e}"
        ))
    })?;
    if !jsonl {
        return Ok(g);
    }
    let mut out = String::with_capacity(g.len() + 64);
    for line in g.lines() {
        if let Some(rest) = line.strip_prefix("root ::=") {
            out.push_str(&format!("item ::={rest}\n"));
        } else if line.starts_with("space ::=") {
            out.push_str("space ::= | \" \"\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("root ::= (item \"\\n\")+\n");
    Ok(out)
}

#[cfg(not(feature = "engine"))]
pub fn gbnf(_schema: &Value, _jsonl: bool) -> Result<String> {
    Err(crate::unavailable())
}
