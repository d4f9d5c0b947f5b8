//! The desktop's use cases without a window: prompt drafts, the history screens, export.

use std::path::Path;

use kerf_api::Code;
use kerf_api::export::{ExportTarget, export};
use kerf_api::history::{self, wire::HistoryFilter, wire::RunDetail, wire::RunDiffView};
use kerf_api::prompts::wire::{DraftPart, PromptDraft};
use kerf_api::prompts::{self, PromptDir};
use kerf_core::lint::{Provider, Severity};
use kerf_store::Store;
use serde_json::{Map, Value, json};

fn shipped(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../prompts")
        .join(name)
}

fn draft(doc_path: &Path) -> PromptDraft {
    prompts::open(doc_path).unwrap().draft
}

#[test]
fn the_prompt_list_shows_every_file_and_a_broken_one_with_its_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(shipped("agent-kg-extract.json"), dir.path().join("kg.json")).unwrap();
    std::fs::write(dir.path().join("broken.json"), "{\"prompt\": 3}").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a prompt").unwrap();
    let list = prompts::list(&[
        PromptDir {
            label: "user".into(),
            path: dir.path().into(),
        },
        PromptDir {
            label: "gone".into(),
            path: dir.path().join("missing"),
        },
    ]);
    let ids: Vec<&str> = list.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["agent-kg-extract", "broken"]);
    assert_eq!(list[0].response_type, Some(kerf_core::ResponseType::Jsonl));
    assert_eq!(list[0].twin.as_deref(), Some("agent-kg-extract-array"));
    let err = list[1].error.as_deref().unwrap();
    assert!(
        err.contains("broken.json") && err.contains("prompt"),
        "{err}"
    );
}

#[test]
fn a_draft_shows_its_variables_preview_branches_and_lint() {
    let path = shipped("agent-kg-extract.json");
    let doc = prompts::open(&path).unwrap();
    assert!(doc.sample_input.as_deref().unwrap().len() > 100);
    let mut d = doc.draft.clone();
    d.template.push_str("\nMARK {{ text | length }}");
    let i = prompts::inspect(&d, Some(&path), "four", &Map::new());
    assert!(i.problems.is_empty(), "{:?}", i.problems);
    assert_eq!(i.variables, ["text"]);
    assert!(i.preview.unwrap().user.ends_with("MARK 4"));
    assert_eq!(i.branches, ["definition", "relationship"]);
    // Some provider has something to say about a real schema (e.g. OpenAI strict mode).
    assert!(i.lint.iter().any(|f| f.provider == Provider::Openai));
}

/// TrustGraph's own jsonl prompts keep their schema under `object-schema`, which TrustGraph
/// ignores: the editor says so, keeps the key when saving, and renames it on request.
#[test]
fn object_schema_is_kept_flagged_for_trustgraph_and_renamed_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tg.json");
    std::fs::write(
        &path,
        "{\n  \"prompt\": \"Extract {{ text }}\",\n  \"response-type\": \"jsonl\",\n  \"object-schema\": {\"type\": \"object\"},\n  \"description\": \"from TrustGraph\"\n}\n",
    )
    .unwrap();
    let d = draft(&path);
    let i = prompts::inspect(&d, Some(&path), "x", &Map::new());
    let finding = i
        .lint
        .iter()
        .find(|f| f.provider == Provider::Trustgraph)
        .expect("a trustgraph finding");
    assert_eq!(
        (finding.keyword.as_str(), finding.severity),
        ("object-schema", Severity::Ignored)
    );
    assert!(
        finding.message.contains("not validated"),
        "{}",
        finding.message
    );

    // Saving as it is keeps the key (and its place).
    prompts::save(&d, &path, None).unwrap();
    let saved: Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let keys: Vec<&str> = saved.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["prompt", "response-type", "object-schema", "description"]
    );

    // The one-click fix: renamed in the draft, in place; the lint finding goes away. (The
    // window reopens a file after saving it, so the next draft starts from what was saved.)
    let opened = prompts::open(&path).unwrap();
    let d = opened.draft.clone();
    let renamed = prompts::rename_schema_key(&d).unwrap();
    assert_eq!(renamed.schema, d.schema);
    let i = prompts::inspect(&renamed, Some(&path), "x", &Map::new());
    assert!(
        !i.lint.iter().any(|f| f.provider == Provider::Trustgraph),
        "{:?}",
        i.lint
    );
    prompts::save(&renamed, &path, Some(&opened.text)).unwrap();
    let saved: Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let keys: Vec<&str> = saved.keys().map(String::as_str).collect();
    assert_eq!(keys, ["prompt", "response-type", "schema", "description"]);
    // A draft with `schema` already comes back as it was.
    assert_eq!(prompts::rename_schema_key(&renamed).unwrap(), renamed);
}

#[test]
fn a_broken_draft_names_the_part_line_and_pointer() {
    let path = shipped("agent-kg-extract.json");
    let mut d = draft(&path);
    d.schema.push_str("\noops");
    let i = prompts::inspect(&d, Some(&path), "x", &Map::new());
    let p = &i.problems[0];
    assert_eq!((p.part, p.code), (DraftPart::Schema, Code::InvalidJson));
    assert_eq!(p.line, Some(d.schema.lines().count() as u32));
    assert!(i.preview.is_none());
    // Variables still show while the schema is broken.
    assert_eq!(i.variables, ["text"]);

    let mut d = draft(&path);
    d.schema = json!({"type": "object", "properties": {"a": {"type": "strnig"}}}).to_string();
    let i = prompts::inspect(&d, Some(&path), "x", &Map::new());
    let p = &i.problems[0];
    assert_eq!((p.part, p.code), (DraftPart::Schema, Code::SchemaInvalid));
    assert_eq!(p.pointer.as_deref(), Some("/properties/a/type"));

    let mut d = draft(&path);
    d.template = "{% for x in %}".into();
    let i = prompts::inspect(&d, Some(&path), "x", &Map::new());
    assert_eq!(i.problems[0].part, DraftPart::Template);
    assert_eq!(i.problems[0].code, Code::TemplateSyntax);
}

#[test]
fn saving_keeps_the_keys_the_editor_does_not_show_and_refuses_broken_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kg.json");
    std::fs::copy(shipped("agent-kg-extract.json"), &path).unwrap();
    let before: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut d = draft(&path);
    d.template = "Extract from: {{ text }}".into();
    d.post = json!({"drop": ["confidence"]}).to_string();
    prompts::save(&d, &path, None).unwrap();
    let after: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(after["prompt"], "Extract from: {{ text }}");
    assert_eq!(after["post"], json!({"drop": ["confidence"]}));
    for key in [
        "id",
        "description",
        "schema",
        "terms",
        "twin",
        "sample-input",
        "system",
    ] {
        assert_eq!(after[key], before[key], "{key} changed");
    }
    // Key order is the file's, new keys at the end.
    let keys: Vec<&String> = after.as_object().unwrap().keys().collect();
    assert_eq!(keys.first().map(|k| k.as_str()), Some("id"));
    assert_eq!(keys.last().map(|k| k.as_str()), Some("post"));
    // Reopened, it is what was saved, not dirty.
    assert_eq!(prompts::open(&path).unwrap().draft.template, d.template);

    let text = std::fs::read_to_string(&path).unwrap();
    let mut bad = d.clone();
    bad.schema = "{".into();
    let e = prompts::save(&bad, &path, None).unwrap_err();
    assert_eq!(e.code, Code::InvalidJson);
    assert!(e.message.contains("nothing was saved"), "{}", e.message);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        text,
        "a refused save changed the file"
    );
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("kerf-tmp"))
        .collect();
    assert!(leftovers.is_empty());

    // Security review, finding 13: a save from the window overwrote a change the CLI had made
    // to the file since it was opened. It is now a conflict, and the file keeps the change.
    let opened = prompts::open(&path).unwrap();
    let elsewhere = text.replace("Extract from: {{ text }}", "Changed by the CLI: {{ text }}");
    std::fs::write(&path, &elsewhere).unwrap();
    let mut mine = opened.draft.clone();
    mine.template = "Mine: {{ text }}".into();
    let e = prompts::save(&mine, &path, Some(&opened.text)).unwrap_err();
    assert_eq!(e.code, Code::Conflict, "{}", e.message);
    assert!(
        e.message.contains("changed on disk since it was opened"),
        "{}",
        e.message
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), elsewhere);
    std::fs::remove_file(&path).unwrap();
    let e = prompts::save(&mine, &path, Some(&opened.text)).unwrap_err();
    assert!(e.message.contains("was deleted"), "{}", e.message);
    // A draft made from the current text saves.
    std::fs::write(&path, &elsewhere).unwrap();
    let reopened = prompts::open(&path).unwrap();
    let mut fresh = reopened.draft.clone();
    fresh.template = "Mine: {{ text }}".into();
    prompts::save(&fresh, &path, Some(&reopened.text)).unwrap();
}

/// A finished run of the shipped agent-kg-extract prompt at `max_tokens`.
fn record(store: &Store, max_tokens: u32, raw: &str) -> i64 {
    let text = std::fs::read_to_string(shipped("agent-kg-extract.json")).unwrap();
    super::stored(
        store,
        &text,
        json!({"max_tokens": max_tokens, "constrain": "auto"}),
        raw,
    )
}

#[test]
fn the_history_screens_list_show_diff_tag_and_note() {
    // Newest first is by the time each run was stored: a clock that ticks a second per reading,
    // from now (the `7d` filter below reads the real clock), puts `b` after `a` whatever the
    // machine's clock does between them.
    let clock = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(kerf_core::time::now_ms()));
    let store = Store::in_memory()
        .unwrap()
        .with_clock(std::sync::Arc::new(move || {
            clock.fetch_add(1000, std::sync::atomic::Ordering::SeqCst)
        }));
    let def = |t: &str| {
        format!(
            "{{\"type\":\"definition\",\"entity\":\"{t}\",\"definition\":\"a thing called {t}\"}}\n"
        )
    };
    let a = record(&store, 64, &def("x"));
    let b = record(&store, 128, &format!("{}{}", def("x"), def("y")));
    let rows = HistoryFilter::default().rows(&store).unwrap();
    assert_eq!(rows.iter().map(|r| r.id).collect::<Vec<_>>(), [b, a]);
    let filtered = HistoryFilter {
        since: Some("7d".into()),
        status: Some(kerf_store::Status::Ok),
        ..Default::default()
    }
    .rows(&store)
    .unwrap();
    assert_eq!(filtered.len(), 2);
    // A status the window cannot name does not reach the use case: the wire type refuses it.
    let bad = serde_json::from_value::<HistoryFilter>(json!({"status": "fine"})).unwrap_err();
    assert!(bad.to_string().contains("unknown variant `fine`"), "{bad}");
    let old = HistoryFilter {
        since: Some("last tuesday".into()),
        ..Default::default()
    }
    .rows(&store)
    .unwrap_err();
    assert_eq!(old.code, Code::Usage);

    let d = RunDetail::from(history::detail(&store, b).unwrap());
    assert_eq!(d.objects.len(), 2);
    assert_eq!(d.vars, json!({"text": "doc"}));
    assert!(d.prompt_text.contains("agent-kg-extract"));

    let diff = RunDiffView::from(&history::diff(&store, a, b).unwrap());
    assert_eq!(diff.params[0].name, "max_tokens");
    assert_eq!(
        (diff.unchanged, diff.added.len(), diff.removed.len()),
        (1, 1, 0)
    );
    assert!(diff.prompt_diff.is_none());

    store.tag(a, "baseline").unwrap();
    store.note(a, Some("first try")).unwrap();
    let tagged = HistoryFilter {
        tag: Some("baseline".into()),
        ..Default::default()
    }
    .rows(&store)
    .unwrap();
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0].note.as_deref(), Some("first try"));
    assert_eq!(
        history::detail(&store, 99).unwrap_err().code,
        Code::NotFound
    );
    // The parameters a stored run ran with, as a rerun takes them back.
    let p = kerf_api::runs::RunParams::from_stored(&d.params, "local", "m.gguf").unwrap();
    assert_eq!((p.max_tokens, p.constrain), (128, true));
    assert_eq!(p.settings.model.as_deref(), Some("m.gguf"));
}

#[test]
fn export_gives_every_target_and_says_what_cannot_be_exported() {
    let kg = shipped("agent-kg-extract.json").display().to_string();
    let arr = shipped("agent-kg-extract-array.json").display().to_string();
    let bundle = export(
        &[kg.clone(), arr.clone()],
        ExportTarget::TrustgraphBundle,
        None,
    )
    .unwrap();
    let v: Value = serde_json::from_str(&bundle.text).unwrap();
    assert!(v["template.agent-kg-extract"].is_string());
    assert!(v["template.agent-kg-extract-array"].is_string());
    assert_eq!(bundle.file_name, "prompts.prompt-config.json");
    let openai = export(std::slice::from_ref(&arr), ExportTarget::Openai, None).unwrap();
    assert!(openai.text.contains("json_schema"));
    let lark = export(std::slice::from_ref(&kg), ExportTarget::Lark, None).unwrap();
    assert!(
        lark.text.starts_with("start: (item \"\\n\")+"),
        "{}",
        lark.text
    );
    assert_eq!(lark.file_name, "agent-kg-extract.lark");
    let two = export(&[kg.clone(), arr], ExportTarget::Anthropic, None).unwrap_err();
    assert_eq!(two.code, Code::Usage);
    // A target the window cannot name does not reach the use case: the wire type refuses it.
    assert!(serde_json::from_value::<ExportTarget>(json!("yaml")).is_err());
    assert_eq!(
        serde_json::from_value::<ExportTarget>(json!("trustgraph-bundle")).unwrap(),
        ExportTarget::TrustgraphBundle
    );
}

#[test]
fn an_exported_bundle_imports_back_losslessly_and_nothing_is_overwritten_or_half_written() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        shipped("agent-kg-extract.json"),
        shipped("extract-definitions.json"),
    ];
    let system = "You extract facts.";
    let bundle = export(&files, ExportTarget::TrustgraphBundle, Some(system)).unwrap();
    let v: Value = serde_json::from_str(&bundle.text).unwrap();
    // (TrustGraph's config values are JSON text.)
    assert_eq!(
        v["system"],
        json!(system).to_string(),
        "the bundle's global system template"
    );
    let config = dir.path().join("prompt-config.json");
    std::fs::write(&config, &bundle.text).unwrap();

    let mine = dir.path().join("mine");
    let written = prompts::import(&config, &mine, None, false).unwrap();
    assert_eq!(
        written,
        vec![
            mine.join("agent-kg-extract.json"),
            mine.join("extract-definitions.json")
        ]
    );
    for (original, back) in files.iter().zip(&written) {
        let read = |p: &Path| -> Value {
            serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
        };
        assert_eq!(read(back), read(original), "{}", back.display());
    }

    // Again: both files exist, so nothing is written and the error names the file.
    std::fs::write(&written[1], "{\"prompt\": \"mine, edited\"}").unwrap();
    let again = prompts::import(&config, &mine, None, false).unwrap_err();
    assert_eq!(again.code, Code::Usage);
    assert!(
        again.message.contains("agent-kg-extract.json exists"),
        "{}",
        again.message
    );
    assert_eq!(
        std::fs::read_to_string(&written[1]).unwrap(),
        "{\"prompt\": \"mine, edited\"}"
    );
    // With overwrite it replaces them.
    prompts::import(&config, &mine, None, true).unwrap();
    assert!(
        std::fs::read_to_string(&written[1])
            .unwrap()
            .contains("definition")
    );

    // A bundle with one broken template writes nothing, and says which template and why.
    let mut broken = v.clone();
    broken["template.extract-definitions"] =
        Value::String(json!({"prompt": "{{ text ", "response-type": "text"}).to_string());
    let config = dir.path().join("broken.json");
    std::fs::write(&config, broken.to_string()).unwrap();
    let fresh = dir.path().join("fresh");
    let err = prompts::import(&config, &fresh, None, false).unwrap_err();
    assert_eq!(err.code, Code::TemplateSyntax, "{}", err.message);
    assert!(
        err.message.contains("extract-definitions"),
        "{}",
        err.message
    );
    assert!(!fresh.exists(), "a refused import wrote something");

    // A template id that would lead out of the folder is refused.
    let mut escape = serde_json::Map::new();
    escape.insert(
        "template.../escaped".into(),
        v["template.agent-kg-extract"].clone(),
    );
    std::fs::write(&config, Value::Object(escape).to_string()).unwrap();
    let err = prompts::import(&config, &fresh, None, false).unwrap_err();
    assert_eq!(err.code, Code::Import, "{}", err.message);
    assert!(err.message.contains("`../escaped`"), "{}", err.message);
    assert!(!fresh.exists() && !dir.path().join("escaped.json").exists());

    // Security review, findings 11 and 13: ids are limited to a portable set (no spaces, no
    // non-ASCII, no two differing only in case, no Windows device names such as `nul`, whose
    // file would be the null device there), and an import that cannot finish writes nothing.
    for bad in [
        "with space",
        "ünï",
        "-dash",
        "..",
        "CON",
        "nul",
        "com1",
        "Lpt9.v2",
        "aux.x",
    ] {
        let mut one = serde_json::Map::new();
        one.insert(
            format!("template.{bad}"),
            v["template.agent-kg-extract"].clone(),
        );
        std::fs::write(&config, Value::Object(one).to_string()).unwrap();
        let err = prompts::import(&config, &fresh, None, false).unwrap_err();
        assert_eq!(err.code, Code::Import, "{bad}: {}", err.message);
        assert!(
            err.message.contains("nothing was written"),
            "{}",
            err.message
        );
    }
    let mut cased = serde_json::Map::new();
    cased.insert("template.Kg".into(), v["template.agent-kg-extract"].clone());
    cased.insert("template.kg".into(), v["template.agent-kg-extract"].clone());
    std::fs::write(&config, Value::Object(cased).to_string()).unwrap();
    let err = prompts::import(&config, &fresh, None, false).unwrap_err();
    assert!(
        err.message.contains("differ only in case"),
        "{}",
        err.message
    );
    assert!(!fresh.exists());
    // The second of two targets is a folder: refused before anything is written, even with
    // overwrite; no file and no temporary file is left.
    let mut two = serde_json::Map::new();
    two.insert(
        "template.first".into(),
        v["template.agent-kg-extract"].clone(),
    );
    two.insert(
        "template.second".into(),
        v["template.agent-kg-extract"].clone(),
    );
    std::fs::write(&config, Value::Object(two).to_string()).unwrap();
    std::fs::create_dir_all(fresh.join("second.json")).unwrap();
    let err = prompts::import(&config, &fresh, None, true).unwrap_err();
    assert!(err.message.contains("is not a file"), "{}", err.message);
    // (Only the files' hidden `.NAME.lock` siblings, which every writer of a prompt shares.)
    let left: Vec<_> = std::fs::read_dir(&fresh)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| !n.to_string_lossy().ends_with(".lock"))
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("second.json")],
        "{left:?}"
    );
    std::fs::remove_dir(fresh.join("second.json")).unwrap();
    let written = prompts::import(&config, &fresh, None, false).unwrap();
    assert_eq!(written.len(), 2);
    let mut left: Vec<String> = std::fs::read_dir(&fresh)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    left.sort();
    assert_eq!(
        left,
        ["first.json", "second.json"],
        "temporary files left behind"
    );
    std::fs::remove_dir_all(&fresh).unwrap();

    // Not JSON: the error names the file, line and column.
    std::fs::write(&config, "{\n  \"system\": oops\n}").unwrap();
    let err = prompts::import(&config, &fresh, None, false).unwrap_err();
    assert_eq!(err.code, Code::InvalidJson);
    assert!(err.message.contains("broken.json:2:13"), "{}", err.message);
}

/// Finding 13 (rest): an import took no lock, so a window saving the same prompt could land
/// between the import's checks and its renames (or be replaced under it). It now holds each
/// file's lock, the one `prompts::save` takes, from its checks to its renames.
#[test]
fn an_import_waits_for_a_save_holding_the_files_lock() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = export(
        &[shipped("agent-kg-extract.json")],
        ExportTarget::TrustgraphBundle,
        None,
    )
    .unwrap();
    let config = dir.path().join("prompt-config.json");
    std::fs::write(&config, &bundle.text).unwrap();
    let mine = dir.path().join("mine");
    let target = mine.join("agent-kg-extract.json");
    let held = kerf_core::files::Lock::exclusive(&target).unwrap();
    let import = {
        let (config, mine) = (config.clone(), mine.clone());
        std::thread::spawn(move || prompts::import(&config, &mine, None, false))
    };
    // Wait until the import is blocked on that lock (the kernel lists it waiting), not for a
    // while: on a busy machine a while can end before the import reaches the lock.
    let lock_file = mine.join(".agent-kg-extract.json.lock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        match waiting_for_flock(&lock_file) {
            Some(true) => break,
            Some(false) => {}
            None => {
                // No /proc/locks (not Linux): the weaker wait, which can pass without the
                // import having reached the lock, but never fails for a sound import.
                std::thread::sleep(std::time::Duration::from_millis(300));
                break;
            }
        }
        if import.is_finished() {
            panic!(
                "the import ended without waiting for the lock: {:?}",
                import.join()
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the import never waited for the lock:\n{}",
            std::fs::read_to_string("/proc/locks").unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    assert!(
        !target.exists(),
        "the import wrote under another writer's lock"
    );
    assert!(!import.is_finished());
    drop(held);
    let written = import.join().unwrap().unwrap();
    assert_eq!(written, vec![target.clone()]);
    assert!(target.is_file());
}

/// Whether a thread of this process is blocked taking the `flock` on `file`: Linux lists each
/// waiter in /proc/locks as a `->` line with its process and the file's inode, e.g.
/// `7: -> FLOCK  ADVISORY  WRITE 4797 fe:00:10117134 0 EOF`. `None` where there is no such list.
fn waiting_for_flock(file: &Path) -> Option<bool> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let locks = std::fs::read_to_string("/proc/locks").ok()?;
        let ino = std::fs::metadata(file).ok()?.ino().to_string();
        let pid = std::process::id().to_string();
        Some(locks.lines().any(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.get(1..6) == Some(&["->", "FLOCK", "ADVISORY", "WRITE", pid.as_str()][..])
                && f.get(6).and_then(|dev_ino| dev_ino.rsplit(':').next()) == Some(ino.as_str())
        }))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        None
    }
}

/// Issue 35: the history's bookkeeping is one use case for both front ends: a blank note clears
/// (the CLI kept a note of spaces, the window cleared it), a blank tag is refused, the export
/// writes what the filter names, the filter reads ages as `kerf history` does and names the
/// field the way the asker wrote it.
#[test]
fn notes_tags_filters_and_the_export_follow_one_rule() {
    let store = Store::in_memory().unwrap();
    let id = record(
        &store,
        64,
        "{\"type\":\"definition\",\"entity\":\"x\",\"definition\":\"y\"}\n",
    );
    history::note(&store, id, Some("before the schema change")).unwrap();
    assert_eq!(
        store.run(id).unwrap().summary.note.as_deref(),
        Some("before the schema change")
    );
    history::note(&store, id, Some("   ")).unwrap();
    assert_eq!(store.run(id).unwrap().summary.note, None);
    let tags = history::tag(&store, id, &["=cmd".into(), "baseline".into()], false).unwrap();
    assert_eq!(tags, ["=cmd", "baseline"]);
    let blank = history::tag(&store, id, &[" ".into()], false).unwrap_err();
    assert_eq!(blank.code, Code::Usage);
    let query = history::Query {
        since: Some("yesterday-ish".into()),
        ..Default::default()
    };
    let cli = query.filter(&|f| format!("--{f}")).unwrap_err();
    assert!(cli.message.starts_with("--since: "), "{}", cli.message);
    let window = query.filter(&|f| f.to_string()).unwrap_err();
    assert!(window.message.starts_with("since: "), "{}", window.message);
    let mut lines = Vec::new();
    let filter = history::Query {
        tag: Some("baseline".into()),
        ..Default::default()
    }
    .filter(&|f| f.to_string())
    .unwrap();
    let n = history::export(&store, &filter, history::ExportFormat::Csv, &mut |l| {
        lines.push(l.to_string());
        Ok(())
    })
    .unwrap();
    assert_eq!(n, 1);
    assert_eq!(lines[0].trim_end(), history::CSV_COLUMNS.join(","));
    // A tag a spreadsheet would run as a formula is written as text.
    assert!(lines[1].contains("'=cmd baseline"), "{}", lines[1]);
}

/// The terms are a part of the draft: shown as the file has them, edited, reaching the preview,
/// checked (an object, valid JSON, each problem in its part) and saved; a draft kept from an
/// older window, without them, keeps the file's.
#[test]
fn terms_are_edited_in_the_draft_and_reach_the_preview() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("topics.json");
    std::fs::copy(shipped("extract-topics.json"), &path).unwrap();
    let mut d = draft(&path);
    let terms: Value = serde_json::from_str(d.terms.as_deref().unwrap()).unwrap();
    assert!(terms["examples"].as_str().unwrap().contains("Calvin cycle"));
    d.terms = Some(r#"{"examples": "{\"topic\": \"KERF-TERM\", \"definition\": \"d\"}"}"#.into());
    let i = prompts::inspect(&d, Some(&path), "a text", &Map::new());
    assert!(i.problems.is_empty(), "{:?}", i.problems);
    assert!(i.preview.unwrap().user.contains("KERF-TERM"));
    // A run's own variable wins over the prompt's term.
    let mut vars = Map::new();
    vars.insert("examples".into(), Value::String("KERF-VAR".into()));
    let i = prompts::inspect(&d, Some(&path), "a text", &vars);
    let user = i.preview.unwrap().user;
    assert!(
        user.contains("KERF-VAR") && !user.contains("KERF-TERM"),
        "{user}"
    );

    let mut bad = d.clone();
    bad.terms = Some("[1, 2]".into());
    let i = prompts::inspect(&bad, Some(&path), "x", &Map::new());
    assert_eq!(i.problems[0].part, DraftPart::Terms, "{:?}", i.problems);
    bad.terms = Some("{\"a\": ".into());
    let i = prompts::inspect(&bad, Some(&path), "x", &Map::new());
    assert!(
        i.problems
            .iter()
            .any(|p| p.part == DraftPart::Terms && p.line.is_some())
    );

    prompts::save(&d, &path, None).unwrap();
    let saved: Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        saved["terms"]["examples"]
            .as_str()
            .unwrap()
            .contains("KERF-TERM")
    );
    let mut older = draft(&path);
    older.terms = None;
    older.template.push('\n');
    prompts::save(&older, &path, None).unwrap();
    let saved: Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        saved["terms"]["examples"]
            .as_str()
            .unwrap()
            .contains("KERF-TERM"),
        "kept"
    );
}
