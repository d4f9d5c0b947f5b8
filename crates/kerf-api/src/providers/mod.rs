//! Cloud providers and OpenAI-compatible servers: adding and removing their definitions
//! (`providers.json`), putting keys into the OS keyring, and probing what a server honours. The
//! CLI's `kerf providers` and the desktop's Providers screen both call these, naming the registry
//! file their workbench holds. A key goes in and never comes back
//! out: views say only where a key would be found.

use std::path::Path;

use kerf_llm::cloud::{self, CloudProvider};
pub use kerf_llm::providers::{Api, Kind, ProviderDef, Registry, Structured};
use kerf_llm::{CancelToken, secrets};

use crate::{ApiError, Code, Result};

pub mod wire;

use wire::{ProviderInfo, ProviderSpec, ProvidersView};

/// Where a provider's key would come from, without reading it out.
pub fn key_status(def: &ProviderDef) -> String {
    match secrets::key_for(def) {
        Ok(Some(k)) => format!("from {}", k.source),
        Ok(None) => "none needed".into(),
        Err(_) => "MISSING".into(),
    }
}

/// A provider as the Providers screen lists it.
pub fn info(def: &ProviderDef) -> ProviderInfo {
    let key = secrets::key_for(def);
    ProviderInfo {
        name: def.name.clone(),
        kind: def.kind,
        base_url: def.base_url.clone(),
        model: def.model.clone(),
        structured: def.structured,
        key_env: def.key_env.clone(),
        no_key: def.no_key,
        max_completion_tokens: def.max_completion_tokens,
        api: def.api,
        fold_enum_case: def.fold_enum_case,
        batch_api: def.batch_api
            || def.is_openai_itself()
            || def.kind != kerf_llm::providers::Kind::Openai,
        prompt_probes: def
            .schema_probes
            .iter()
            .filter(|p| p.model == def.model)
            .count(),
        requests_per_minute: def.rate_limits.requests_per_minute,
        tokens_per_minute: def.rate_limits.tokens_per_minute,
        key_found: matches!(key, Ok(Some(_))),
        key: key_status(def),
        // The latest probe of this model, the toy one or a prompt's.
        probe: def
            .probe
            .iter()
            .chain(def.schema_probes.iter().filter(|p| p.model == def.model))
            .max_by(|a, b| a.at.cmp(&b.at))
            .map(|p| {
                let modes: Vec<String> = p
                    .modes
                    .iter()
                    .map(|m| format!("{} {}", m.mode.as_str(), m.result))
                    .collect();
                match &p.schema {
                    Some(h) => format!("{} (prompt schema {h}): {}", p.at, modes.join(", ")),
                    None => format!("{}: {}", p.at, modes.join(", ")),
                }
            }),
    }
}

/// The providers as they are configured (`kerf providers list` prints each definition whole).
pub fn registry(path: &Path) -> Result<Registry> {
    Ok(Registry::load(path)?)
}

/// Which keyring holds keys here, as people read it.
pub fn keyring() -> &'static str {
    secrets::store()
}

/// Every configured provider, the file they live in, and which keyring holds keys here.
pub fn list(registry: &Path) -> Result<ProvidersView> {
    let registry = Registry::load(registry)?;
    Ok(ProvidersView {
        config: registry.path.display().to_string(),
        keyring: secrets::store().to_string(),
        providers: registry.providers.iter().map(info).collect(),
    })
}

fn usage(message: String) -> ApiError {
    ApiError::new(Code::Usage, message)
}

/// Check a provider name: it becomes a keyring entry and a `--provider` argument.
pub fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
    if !ok || name == "local" {
        return Err(usage(format!(
            "`{name}` cannot name a provider: use letters, digits, `-`, `_` or `.` (and not `local`, the bundled engine)"
        )));
    }
    Ok(())
}

/// The definition `spec` describes, checked (name, kind, URL, model, structured mode).
pub fn definition(spec: &ProviderSpec) -> Result<ProviderDef> {
    check_name(&spec.name)?;
    let (kind, structured) = (spec.kind, spec.structured.unwrap_or_default());
    let base_url = spec
        .base_url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty());
    if let Some(u) = base_url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(usage(format!(
            "base URL `{u}` must start with http:// or https://"
        )));
    }
    if let Some(u) = base_url {
        let found = kerf_llm::providers::credentials_in(u);
        if !found.is_empty() {
            return Err(usage(format!(
                "the base URL holds credentials ({}): Kerf never stores or prints a key in a URL; remove them and store the key with `kerf providers set-key {}`",
                found.join(", "),
                spec.name
            )));
        }
    }
    if spec.model.trim().is_empty() {
        return Err(usage(format!(
            "provider {}: a model is needed (the model id the API expects, e.g. gpt-4o-mini)",
            spec.name
        )));
    }
    let mut def = ProviderDef::new(&spec.name, kind, base_url, spec.model.trim());
    def.key_env = spec
        .key_env
        .as_deref()
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(String::from);
    def.no_key = spec.no_key;
    def.structured = structured;
    def.max_completion_tokens = spec.max_completion_tokens;
    def.api = spec.api.unwrap_or_default();
    def.fold_enum_case = spec.fold_enum_case;
    def.batch_api = spec.batch_api.unwrap_or(false);
    def.allow_plain_http = spec.allow_plain_http;
    def.rate_limits = kerf_llm::ratelimit::RateLimits {
        requests_per_minute: spec.requests_per_minute.filter(|&n| n > 0),
        tokens_per_minute: spec.tokens_per_minute.filter(|&n| n > 0),
    };
    Ok(def)
}

/// What the window asks the user, in a native dialog the page cannot answer, before it adds
/// `spec`: each way it would send a key to a place the user did not type the key into Kerf for.
/// The page chooses every field of a spec, so a script in it could otherwise point a provider at
/// its own server with `$AWS_SECRET_ACCESS_KEY` as the key. `None`: nothing to ask (no key, or
/// only the kind's own variable for its own public endpoint).
pub fn key_consent(spec: &ProviderSpec) -> Result<Option<String>> {
    let def = definition(spec)?;
    if def.no_key {
        return Ok(None);
    }
    let public = def.base_url == def.kind.default_base_url();
    let mut asks = Vec::new();
    if let Some(var) = &def.key_env
        && !(public && var == def.kind.key_env())
    {
        asks.push(format!("read its key from the environment variable ${var}"));
    }
    if spec.keep_key {
        asks.push("keep the key already stored for it, even if its endpoint changed".into());
    }
    if def.allow_plain_http {
        asks.push(
            "send the key unencrypted over plain http:// to a host that is not this machine".into(),
        );
    }
    if asks.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "Provider “{}” will {}, for requests to {}.\n\nAllow this only if you are setting it up yourself.",
        def.name,
        asks.join(", and "),
        def.base_url
    )))
}

/// What `add` did.
pub struct Added {
    pub def: ProviderDef,
    /// The registry file written.
    pub config: String,
    /// The stored key was removed: the provider now points at another endpoint.
    pub key_dropped: bool,
}

/// Add (or replace) a provider. Its probe is dropped when the endpoint or model changed (it
/// described another server). A replaced provider keeps its stored key only while its endpoint
/// stays the same (or `keep_key` re-confirms it): the key was given for that server.
pub fn add(registry: &Path, spec: &ProviderSpec) -> Result<Added> {
    let mut def = definition(spec)?;
    let (key_dropped, config) = Registry::update(registry, |registry| {
        let mut key_dropped = false;
        if let Ok(old) = registry.get(&def.name) {
            let moved = old.base_url != def.base_url;
            if moved && !spec.keep_key {
                // Before the new endpoint is written: a key that cannot be removed (a keyring
                // that fails) leaves the provider where it was, instead of sending the key to
                // the new host.
                key_dropped = secrets::delete_key(&def.name)?;
            } else if moved {
                // Re-confirmed: the stored key is tied to the new origin (keys go only to the
                // origin they were given for).
                secrets::rebind_key(&def)?;
            }
            if !moved && old.kind == def.kind {
                // Verdicts are per model: the prompt probes keep theirs, the toy probe only
                // while the model stays.
                def.schema_probes = old.schema_probes.clone();
                if old.model == def.model {
                    def.probe = old.probe.clone();
                }
            }
        }
        registry.upsert(def.clone());
        Ok((key_dropped, registry.path.display().to_string()))
    })?;
    Ok(Added {
        def,
        config,
        key_dropped,
    })
}

/// Remove a provider and its key; whether a key was removed.
pub fn remove(registry: &Path, name: &str) -> Result<bool> {
    let def = Registry::update(registry, |registry| registry.remove(name))?;
    Ok(secrets::delete_key(&def.name).unwrap_or(false))
}

/// Store a configured provider's key in the keyring (surrounding whitespace trimmed), tied to
/// the origin its base URL names: a provider of that name elsewhere never gets it.
pub fn set_key(registry: &Path, name: &str, key: &str) -> Result<()> {
    let def = Registry::load(registry)?.get(name)?.clone();
    secrets::set_key(&def, key)?;
    Ok(())
}

/// Remove a provider's key from the keyring; whether there was one.
pub fn delete_key(name: &str) -> Result<bool> {
    Ok(secrets::delete_key(name)?)
}

/// A configured provider ready to run, its key looked up, with the `grammar` mode's GBNF
/// written by llama.cpp's own converter (the same one the local engine uses).
pub fn cloud_provider(def: ProviderDef) -> Result<CloudProvider> {
    let mut p = CloudProvider::new(def)?;
    p.grammar = Some(kerf_llama::grammar::gbnf);
    Ok(p)
}

/// Probe which structured-output modes the server honours, store the result, and say which
/// mode `auto` now picks and why. With a prompt, the probe sends that prompt's own schema (its
/// verdict is kept per model and schema, and `auto` follows it for that prompt's runs);
/// without, a one-field toy schema.
pub fn probe(
    registry: &Path,
    name: &str,
    prompt: Option<&kerf_core::Prompt>,
    cancel: &CancelToken,
) -> Result<(kerf_llm::providers::Probe, Structured, String)> {
    // The probe talks to the server without holding the registry's lock; storing it takes it.
    let provider = cloud_provider(Registry::load(registry)?.get(name)?.clone())?;
    let target = prompt.map(crate::prompts::constraint_for);
    if let Some(kerf_llm::Constraint::None) = target {
        return Err(ApiError::new(
            Code::Usage,
            "the prompt has no schema to probe with (a json prompt with a schema, or a jsonl prompt)",
        ));
    }
    let probe = kerf_llm::runtime::block_on(cloud::probe(&provider, target.as_ref(), cancel));
    let def = Registry::update(registry, |registry| {
        let def = registry.get_mut(name)?;
        if probe.schema.is_some() {
            def.schema_probes
                .retain(|p| !(p.model == probe.model && p.schema == probe.schema));
            def.schema_probes.push(probe.clone());
        } else {
            def.probe = Some(probe.clone());
        }
        Ok(def.clone())
    })?;
    let constraint = target.unwrap_or(kerf_llm::Constraint::Json(
        serde_json::json!({"type": "object"}),
    ));
    let (chosen, why) = CloudProvider::with_key(def, None).mode_for(&constraint);
    Ok((probe, chosen, why))
}

/// One provider as listed (after a change the screen shows at once).
pub fn one(registry: &Path, name: &str) -> Result<ProviderInfo> {
    Ok(info(Registry::load(registry)?.get(name)?))
}
