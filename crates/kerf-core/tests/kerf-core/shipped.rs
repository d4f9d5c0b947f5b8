//! Every data file shipped is exercised: every prompt loads, renders its sample and compiles;
//! every schema compiles; prompts and `schemas/` agree; twins pair up.

use kerf_core::{CompiledSchema, Prompt, ResponseType};
use serde_json::{Map, Value};

use crate::support::repo;

fn json_files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(repo().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    v.sort();
    v
}

fn prompts() -> Vec<Prompt> {
    json_files("prompts")
        .iter()
        .map(|p| Prompt::load(p).unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

#[test]
fn every_prompt_loads_without_warnings_and_renders_its_sample() {
    let all = prompts();
    assert_eq!(all.len(), 14);
    for p in &all {
        assert!(p.warnings.is_empty(), "{}: {:?}", p.id(), p.warnings);
        let sample = p
            .sample_input_path()
            .unwrap_or_else(|| panic!("{} has no sample input", p.id()));
        let text = std::fs::read_to_string(&sample)
            .unwrap_or_else(|e| panic!("{}: {e}", sample.display()));
        let mut vars = Map::new();
        vars.insert(p.file.input_variable().into(), Value::String(text.clone()));
        let r = p
            .render(&Map::new(), &vars)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            r.user.contains(text.trim()),
            "{}: the sample is in the prompt",
            p.id()
        );
        assert!(
            !r.user.contains("{{") && !r.user.contains("{%"),
            "{}: fully rendered",
            p.id()
        );
        assert!(r.system.is_some(), "{}", p.id());
        assert_eq!(
            p.input_variables(),
            vec![p.file.input_variable().to_string()],
            "{}: only the input is needed",
            p.id()
        );
    }
}

#[test]
fn every_shipped_schema_compiles() {
    let files = json_files("schemas");
    assert!(files.len() >= 15);
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        CompiledSchema::compile(&v, &f.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn the_six_trustgraph_extractions_exist_with_array_twins() {
    for id in [
        "extract-definitions",
        "extract-relationships",
        "extract-topics",
        "extract-rows",
        "agent-kg-extract",
        "extract-with-ontologies",
    ] {
        let l = Prompt::load(&repo().join(format!("prompts/{id}.json"))).unwrap();
        let a = Prompt::load(&repo().join(format!("prompts/{id}-array.json"))).unwrap();
        assert_eq!(l.file.response_type, ResponseType::Jsonl, "{id}");
        assert_eq!(a.file.response_type, ResponseType::Json, "{id}-array");
        assert_eq!(l.file.twin.as_deref(), Some(a.id()));
        assert_eq!(a.file.twin.as_deref(), Some(l.id()));
        // The twin's schema is an array of exactly the line schema.
        let mut line = l.file.schema.clone().unwrap();
        line.as_object_mut().unwrap().remove("$schema");
        let arr = a.file.schema.clone().unwrap();
        assert_eq!(arr["type"], "array");
        assert_eq!(arr["items"], line, "{id}: twin schemas agree");
    }
    let unions = [
        ("agent-kg-extract", vec!["definition", "relationship"]),
        (
            "extract-with-ontologies",
            vec!["entity", "relationship", "attribute"],
        ),
    ];
    for (id, tags) in unions {
        let p = Prompt::load(&repo().join(format!("prompts/{id}.json"))).unwrap();
        assert_eq!(p.parser.schema().unwrap().union_tags(), tags, "{id}");
    }
}

#[test]
fn prompt_schemas_match_the_files_in_schemas() {
    let pairs = [
        ("extract-definitions", "definitions"),
        ("extract-relationships", "relationships"),
        ("extract-topics", "topics"),
        ("extract-rows", "rows"),
        ("agent-kg-extract", "agent-kg-extract"),
        ("extract-with-ontologies", "extract-with-ontologies"),
    ];
    let read = |p: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(repo().join(p)).unwrap()).unwrap()
    };
    for (prompt, schema) in pairs {
        let l = read(&format!("prompts/{prompt}.json"));
        let a = read(&format!("prompts/{prompt}-array.json"));
        assert_eq!(
            l["schema"],
            read(&format!("schemas/{schema}.schema.json")),
            "{prompt}"
        );
        assert_eq!(
            a["schema"],
            read(&format!("schemas/{schema}-array.schema.json")),
            "{prompt}-array"
        );
    }
    assert_eq!(
        read("prompts/lightrag-extract-delimited.json")["schema"],
        read("schemas/lightrag-record.schema.json")
    );
    assert_eq!(
        read("prompts/lightrag-extract-json.json")["schema"],
        read("schemas/lightrag-json.schema.json")
    );
}

#[test]
fn lightrag_pair_parses_its_own_example_format() {
    let d = Prompt::load(&repo().join("prompts/lightrag-extract-delimited.json")).unwrap();
    let reply = "entity<|#|>Flannan Isles<|#|>geo<|#|>Islands west of Scotland\nentity<|#|>James Ducat<|#|>person<|#|>A keeper who vanished\nrelation<|#|>James Ducat<|#|>Flannan Isles<|#|>keeper, disappearance<|#|>Ducat kept the Flannan Isles light\n<|COMPLETE|>";
    let r = d.parse(reply, &Map::new());
    assert_eq!(r.objects.len(), 3, "{:?}", r.dropped);
    let j = Prompt::load(&repo().join("prompts/lightrag-extract-json.json")).unwrap();
    let reply = r#"{"entities": [{"entity_name": "James Ducat", "entity_type": "person", "entity_description": "A keeper"}], "relationships": [], "content_keywords": ["lighthouse"]}"#;
    let r = j.parse(reply, &Map::new());
    assert_eq!(r.objects.len(), 1, "{:?}", r.dropped);
    assert!(r.dropped.is_empty());
}
