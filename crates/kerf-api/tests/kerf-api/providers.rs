//! The providers use cases without a window: a definition is checked before it is saved, a key
//! goes into the keyring (the kernel's: see `in_kernel_keyring`) and only where it is found comes
//! back, removing a provider takes its key too.

use kerf_api::Code;
use kerf_api::providers;
use kerf_api::providers::wire::ProviderSpec;
use kerf_llm::providers::Kind;

fn spec(name: &str) -> ProviderSpec {
    ProviderSpec {
        name: name.into(),
        kind: Kind::Openai,
        base_url: Some("http://127.0.0.1:9/v1/".into()),
        model: "m".into(),
        key_env: None,
        no_key: false,
        structured: None,
        max_completion_tokens: false,
        api: None,
        fold_enum_case: false,
        allow_plain_http: false,
        requests_per_minute: None,
        tokens_per_minute: None,
        keep_key: false,
        batch_api: None,
    }
}

#[test]
fn a_definition_is_checked_and_names_what_is_wrong() {
    let bad = |f: &dyn Fn(&mut ProviderSpec), says: &str| {
        let mut s = spec("ok-name");
        f(&mut s);
        let e = providers::definition(&s).unwrap_err();
        assert_eq!(e.code, Code::Usage);
        assert!(e.message.contains(says), "{} lacks {says}", e.message);
    };
    bad(&|s| s.name = "local".into(), "cannot name a provider");
    bad(&|s| s.name = "has space".into(), "cannot name a provider");
    // A kind or mode the window cannot name does not reach the use case: the wire type
    // refuses it, naming the field.
    let field = |v: serde_json::Value| -> String {
        let mut spec = serde_json::to_value(spec("ok-name")).unwrap();
        spec.as_object_mut()
            .unwrap()
            .extend(v.as_object().unwrap().clone());
        serde_json::from_value::<ProviderSpec>(spec)
            .unwrap_err()
            .to_string()
    };
    assert!(field(serde_json::json!({"kind": "openia"})).contains("unknown variant `openia`"));
    assert!(
        field(serde_json::json!({"structured": "strict"})).contains("unknown variant `strict`")
    );
    bad(
        &|s| s.base_url = Some("127.0.0.1/v1".into()),
        "must start with http://",
    );
    bad(&|s| s.model = " ".into(), "a model is needed");
    // Security review, finding 13: credentials in a base URL were stored and printed.
    bad(
        &|s| s.base_url = Some("https://user:hunter22@llm.example/v1".into()),
        "holds credentials (user:password@)",
    );
    bad(
        &|s| s.base_url = Some("https://llm.example/v1?api-version=1&key=AIzaSECRET".into()),
        "holds credentials (?key=)",
    );
    let e = providers::definition(&{
        let mut s = spec("ok-name");
        s.base_url = Some("https://llm.example/v1?key=AIzaSECRET".into());
        s
    })
    .unwrap_err();
    assert!(!e.message.contains("AIzaSECRET"), "{}", e.message);
    let mut azure = spec("azure");
    azure.base_url = Some("https://x.openai.azure.com/openai?api-version=2024-10-21".into());
    assert!(
        providers::definition(&azure).is_ok(),
        "a plain query parameter is fine"
    );

    let def = providers::definition(&spec("ok-name")).unwrap();
    assert_eq!(
        def.base_url, "http://127.0.0.1:9/v1",
        "the trailing slash is trimmed"
    );
    let mut public = spec("claude");
    public.kind = Kind::Anthropic;
    public.base_url = Some(String::new());
    assert_eq!(
        providers::definition(&public).unwrap().base_url,
        "https://api.anthropic.com/v1",
        "an empty URL is the kind's public endpoint"
    );
}

#[test]
fn a_key_goes_into_the_keyring_and_only_its_place_comes_back() {
    if !super::isolation::in_kernel_keyring(
        "providers::a_key_goes_into_the_keyring_and_only_its_place_comes_back",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("providers.json");
    let path = path.as_path();
    let name = super::isolation::unique("api-test");
    let key = format!("sk-{name}-secret");

    let added = providers::add(path, &spec(&name)).unwrap();
    assert_eq!(added.def.name, name);
    assert!(added.config.ends_with("providers.json"));
    let listed = providers::list(path).unwrap();
    let row = listed.providers.iter().find(|p| p.name == name).unwrap();
    assert!(
        !row.key_found || row.key.contains("OPENAI_API_KEY"),
        "{}",
        row.key
    );

    providers::set_key(path, &name, &format!("  {key}\n")).unwrap();
    let listed = providers::list(path).unwrap();
    let row = listed.providers.iter().find(|p| p.name == name).unwrap();
    assert!(row.key_found);
    assert!(row.key.contains("keyring"), "{}", row.key);
    let wire = serde_json::to_string(&listed).unwrap();
    assert!(!wire.contains(&key), "the key crossed the wire");

    // Security review, finding 13: the key stayed with a provider whose endpoint was changed, and
    // went to the new server. Re-adding it with the same endpoint keeps the key; with another,
    // the key is dropped unless re-confirmed.
    let key_found = |path: &std::path::Path| {
        providers::list(path)
            .unwrap()
            .providers
            .into_iter()
            .find(|p| p.name == name)
            .unwrap()
            .key
            .contains("keyring")
    };
    let mut same = spec(&name);
    same.model = "m2".into();
    assert!(!providers::add(path, &same).unwrap().key_dropped);
    assert!(key_found(path));
    let mut moved = spec(&name);
    moved.base_url = Some("http://127.0.0.1:10/v1".into());
    moved.keep_key = true;
    assert!(!providers::add(path, &moved).unwrap().key_dropped);
    assert!(key_found(path), "re-confirmed with keep_key");
    moved.base_url = Some("https://elsewhere.example/v1".into());
    moved.keep_key = false;
    assert!(providers::add(path, &moved).unwrap().key_dropped);
    assert!(
        !key_found(path),
        "the key followed the provider to a new endpoint"
    );
    providers::set_key(path, &name, &key).unwrap();

    let unknown = providers::set_key(path, "no-such-provider", "x").unwrap_err();
    assert_eq!(unknown.code, Code::ProviderConfig, "{unknown:?}");

    assert!(
        providers::remove(path, &name).unwrap(),
        "the key was not removed with the provider"
    );
    assert!(
        !providers::delete_key(&name).unwrap(),
        "a key is left behind"
    );
    assert!(
        providers::list(path)
            .unwrap()
            .providers
            .iter()
            .all(|p| p.name != name)
    );
    let file = std::fs::read_to_string(path).unwrap();
    assert!(!file.contains(&key));
}

/// Finding 13: the page chooses every field of a provider, so a script in it could aim any
/// environment variable at its own server. The window asks first whenever a spec would send a
/// key anywhere but the kind's own variable to the kind's own endpoint.
#[test]
fn the_window_asks_before_a_provider_sends_a_key_somewhere_new() {
    let ask = |f: &dyn Fn(&mut ProviderSpec)| {
        let mut s = spec("p");
        f(&mut s);
        providers::key_consent(&s).unwrap()
    };
    // A typed key for a server, or none needed: nothing to ask.
    assert_eq!(ask(&|_| {}), None);
    assert_eq!(
        ask(&|s| {
            s.no_key = true;
            s.key_env = Some("HOME".into());
        }),
        None
    );
    // The kind's own variable for the kind's own endpoint is the plain default.
    assert_eq!(
        ask(&|s| {
            s.base_url = None;
            s.key_env = Some("OPENAI_API_KEY".into());
        }),
        None
    );
    let q = ask(&|s| s.key_env = Some("AWS_SECRET_ACCESS_KEY".into())).unwrap();
    assert!(q.contains("$AWS_SECRET_ACCESS_KEY"), "{q}");
    assert!(q.contains("http://127.0.0.1:9/v1"), "{q}");
    let q = ask(&|s| {
        s.key_env = Some("OPENAI_API_KEY".into());
        s.base_url = Some("https://elsewhere.example/v1".into());
    })
    .unwrap();
    assert!(
        q.contains("$OPENAI_API_KEY") && q.contains("elsewhere.example"),
        "{q}"
    );
    let q = ask(&|s| s.keep_key = true).unwrap();
    assert!(q.contains("keep the key already stored"), "{q}");
    let q = ask(&|s| s.allow_plain_http = true).unwrap();
    assert!(q.contains("plain http://"), "{q}");
}

#[test]
fn rate_limits_are_kept_with_the_definition_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let path = &dir.path().join("providers.json");
    let mut s = spec("limited");
    s.no_key = true;
    s.requests_per_minute = Some(30);
    s.tokens_per_minute = Some(0); // zero means "not set", not "never"
    let added = providers::add(path, &s).unwrap();
    assert_eq!(added.def.rate_limits.requests_per_minute, Some(30));
    assert_eq!(added.def.rate_limits.tokens_per_minute, None);
    let saved = std::fs::read_to_string(path).unwrap();
    assert!(
        saved.contains("\"rate_limits\"") && saved.contains("\"requests_per_minute\": 30"),
        "{saved}"
    );
    let info = providers::info(&added.def);
    assert_eq!(
        (info.requests_per_minute, info.tokens_per_minute),
        (Some(30), None)
    );
}
