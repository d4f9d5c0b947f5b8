//! A chunk size chosen in Kerf, as a TrustGraph flow reads it, and read back.
//!
//! TrustGraph's chunkers take their size and overlap from two flow parameters, `chunk-size` and
//! `chunk-overlap`, given as strings when a flow is started (`tg-start-flow … --parameters`, or
//! the API's `start-flow` request's `parameters`) and cast to integers on every document
//! (`ChunkingService.chunk_document`; a missing or unreadable one falls back to the processor's
//! default). Which chunker runs is the processor deployed in the flow: `chunker-recursive` or
//! `chunker-token`. The export is `{"processor", "parameters": {"chunk-size", "chunk-overlap"},
//! "kerf": {…}}`; the import reads `parameters` as TrustGraph does, but refuses what TrustGraph
//! would silently replace by its default, naming the place.

use serde_json::{Map, Value, json};

use super::Exported;
use crate::chunk::{ChunkSettings, Chunker};
use crate::error::{Error, Result};

/// The processor (its console script in trustgraph-flow) that runs `chunker`.
pub fn processor(chunker: Chunker) -> &'static str {
    match chunker {
        Chunker::Recursive => "chunker-recursive",
        Chunker::Token => "chunker-token",
    }
}

/// `settings` as a TrustGraph flow takes them.
pub fn export(settings: &ChunkSettings) -> Result<Exported> {
    settings.check()?;
    let value = json!({
        "processor": processor(settings.chunker),
        "parameters": {
            "chunk-size": settings.size.to_string(),
            "chunk-overlap": settings.overlap.to_string(),
        },
        "kerf": {
            "chunker": settings.chunker.as_str(),
            "chunk-size": settings.size,
            "chunk-overlap": settings.overlap,
            "unit": settings.chunker.unit(),
        },
    });
    let notes = vec![
        format!(
            "start the flow with these `parameters` (they override the processor's defaults on every document), with the `{}` processor deployed",
            processor(settings.chunker)
        ),
        "TrustGraph numbers chunks from 1 as Kerf does, but the chunk offsets it records are approximate (its own code says so); Kerf's `start`/`end` are exact".into(),
    ];
    Ok(Exported { value, notes })
}

/// Whether `value` looks like chunk settings (a `parameters` object holding a chunk key), not a
/// prompt config.
pub fn is_chunking(value: &Value) -> bool {
    value
        .get("parameters")
        .unwrap_or(value)
        .as_object()
        .is_some_and(has_chunk_parameter)
}

fn has_chunk_parameter(p: &Map<String, Value>) -> bool {
    p.contains_key("chunk-size") || p.contains_key("chunk-overlap")
}

/// Chunk settings read back from an export (or a flow's `parameters` object alone); `place`
/// names the source in errors. The chunker comes from `processor` (else `kerf.chunker`, else
/// recursive); a parameter that is absent takes that chunker's processor default, as TrustGraph
/// does.
pub fn import(value: &Value, place: &str) -> Result<ChunkSettings> {
    let err = |pointer: &str, message: String| Error::Import {
        place: format!("{place} {pointer}"),
        message,
    };
    let Value::Object(map) = value else {
        return Err(err("", "expected a JSON object of chunk settings".into()));
    };
    let chunker = match map.get("processor") {
        Some(Value::String(p)) => Chunker::ALL
            .into_iter()
            .find(|c| processor(*c) == p)
            .ok_or_else(|| {
                err(
                    "/processor",
                    format!("`{p}` is not one of TrustGraph's chunkers (chunker-recursive, chunker-token)"),
                )
            })?,
        Some(_) => return Err(err("/processor", "expected a string".into())),
        None => match map.get("kerf").and_then(|k| k.get("chunker")).and_then(Value::as_str) {
            Some("token") => Chunker::Token,
            _ => Chunker::Recursive,
        },
    };
    // An export holds the flow's `parameters`; a flow's parameters may also come alone. An
    // object with neither is not chunk settings (a prompt file given by mistake), not defaults.
    let empty = Map::new();
    let (params, at) = match map.get("parameters") {
        Some(Value::Object(p)) => (p, "/parameters"),
        Some(_) => return Err(err("/parameters", "expected an object".into())),
        None if has_chunk_parameter(map) => (map, ""),
        None if map.contains_key("processor") => (&empty, "/parameters"),
        None => {
            return Err(err(
                "",
                "not chunk settings: no `parameters`, `chunk-size` or `chunk-overlap` (write them with `kerf export --to trustgraph-chunking`)".into(),
            ));
        }
    };
    let defaults = chunker.processor_defaults();
    // TrustGraph casts with Python's int(): a string of digits (or a number).
    let read = |key: &str, default: usize| -> Result<usize> {
        let pointer = format!("{at}/{key}");
        match params.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::String(s)) => s.trim().parse().map_err(|_| {
                err(
                    &pointer,
                    format!("`{s}` is not a whole number of {}", chunker.unit()),
                )
            }),
            Some(Value::Number(n)) => n
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| err(&pointer, format!("{n} is not a whole number"))),
            Some(_) => Err(err(&pointer, "expected a string of digits".into())),
        }
    };
    let settings = ChunkSettings {
        chunker,
        size: read("chunk-size", defaults.size)?,
        overlap: read("chunk-overlap", defaults.overlap)?,
    };
    settings
        .check()
        .map_err(|e| err(if at.is_empty() { "/" } else { at }, e.to_string()))?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn settings_go_out_as_flow_parameters_and_come_back() {
        for settings in [
            ChunkSettings {
                chunker: Chunker::Recursive,
                size: 1000,
                overlap: 50,
            },
            ChunkSettings {
                chunker: Chunker::Token,
                size: 500,
                overlap: 25,
            },
        ] {
            let out = export(&settings).unwrap();
            assert_eq!(
                out.value["parameters"]["chunk-size"],
                settings.size.to_string()
            );
            assert!(is_chunking(&out.value));
            assert_eq!(import(&out.value, "f.json").unwrap(), settings);
        }
    }

    #[test]
    fn a_flows_parameters_alone_are_read_and_an_object_without_them_is_refused() {
        let alone = json!({"chunk-size": "1000", "chunk-overlap": "50"});
        assert!(is_chunking(&alone));
        let s = import(&alone, "p.json").unwrap();
        assert_eq!(
            (s.chunker, s.size, s.overlap),
            (Chunker::Recursive, 1000, 50)
        );
        let bad = json!({"chunk-size": "1k"});
        let e = import(&bad, "p.json").unwrap_err().to_string();
        assert!(
            e.contains("p.json /chunk-size") && e.contains("`1k`"),
            "{e}"
        );
        // A prompt file given by mistake: named, not read as the defaults.
        let prompt = json!({"id": "agent-kg-extract", "template": "Extract {{text}}"});
        assert!(!is_chunking(&prompt));
        let e = import(&prompt, "prompt.json").unwrap_err().to_string();
        assert!(e.contains("not chunk settings"), "{e}");
        // A processor named without parameters: its defaults, as TrustGraph takes them.
        let bare = json!({"processor": "chunker-token"});
        let s = import(&bare, "f.json").unwrap();
        assert_eq!((s.chunker, s.size, s.overlap), (Chunker::Token, 250, 15));
    }

    #[test]
    fn a_missing_parameter_takes_the_processors_default_and_a_bad_one_is_named() {
        let v = json!({"processor": "chunker-token", "parameters": {"chunk-size": "300"}});
        let s = import(&v, "f.json").unwrap();
        assert_eq!((s.chunker, s.size, s.overlap), (Chunker::Token, 300, 15));
        let bad = json!({"parameters": {"chunk-size": "2k"}});
        let e = import(&bad, "f.json").unwrap_err().to_string();
        assert!(
            e.contains("f.json /parameters/chunk-size") && e.contains("`2k`"),
            "{e}"
        );
        let wide = json!({"parameters": {"chunk-size": "50", "chunk-overlap": "50"}});
        assert!(
            import(&wide, "f.json")
                .unwrap_err()
                .to_string()
                .contains("smaller than")
        );
        let other = json!({"processor": "chunker-semantic", "parameters": {}});
        assert!(
            import(&other, "f.json")
                .unwrap_err()
                .to_string()
                .contains("/processor")
        );
    }
}
