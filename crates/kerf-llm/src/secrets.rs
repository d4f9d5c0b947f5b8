//! API keys: the OS keyring first (`kerf providers set-key NAME`), then environment variables
//! (the provider's own `key_env`, then the kind's standard one: `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`). A [`Key`] never prints itself, and [`redact`] scrubs
//! it from any text that might echo it (a provider's error message, a transport error).
//!
//! On Linux the keyring is the desktop's Secret Service (GNOME Keyring, KWallet) when a session
//! bus offers one, else the kernel's user keyring (keyutils), which keeps keys until reboot;
//! [`store`] says which is in use so the CLI can tell the user. `KERF_KEYRING=kernel` or
//! `secret-service` forces one.

use crate::providers::ProviderDef;
use crate::{Error, Result};

const SERVICE: &str = "kerf";

/// Where a key came from (shown to the user; the key itself never is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Keyring,
    Env(String),
}

impl std::fmt::Display for KeySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeySource::Keyring => write!(f, "the {} keyring", store()),
            KeySource::Env(v) => write!(f, "${v}"),
        }
    }
}

/// An API key. `Debug` and `Display` show only where it came from.
#[derive(Clone)]
pub struct Key {
    value: String,
    pub source: KeySource,
}

impl Key {
    pub fn new(value: impl Into<String>, source: KeySource) -> Self {
        Key {
            value: value.into(),
            source,
        }
    }

    pub fn expose(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key(from {})", self.source)
    }
}

/// The shortest piece of a key that [`redact`] removes wherever it appears.
pub const REDACT_MIN_PIECE: usize = 6;

/// Replace every occurrence of `key` in `text`, and of any piece of it of 6 or more characters
/// (a server may quote back a masked `sk-abc…xyz`, or the key without its first or last
/// characters), with `[redacted]`; a key shorter than that is removed wherever it appears whole.
///
/// Every run of text made of 6-character windows that also occur in the key is replaced: any
/// piece of the key of 6+ characters is such a run, so none survives, whatever is cut off either
/// end. (A stretch of ordinary text that happens to share 6 characters with a random key is
/// redacted too; that is the safe way to be wrong.)
pub fn redact(text: &str, key: Option<&Key>) -> String {
    let Some(key) = key.map(Key::expose).filter(|k| !k.is_empty()) else {
        return text.to_string();
    };
    let key_chars: Vec<char> = key.chars().collect();
    if key_chars.len() < REDACT_MIN_PIECE {
        return text.replace(key, "[redacted]");
    }
    let windows: std::collections::HashSet<&[char]> = key_chars.windows(REDACT_MIN_PIECE).collect();
    let chars: Vec<char> = text.chars().collect();
    let mut hidden = vec![false; chars.len()];
    for (i, w) in chars.windows(REDACT_MIN_PIECE).enumerate() {
        if windows.contains(w) {
            hidden[i..i + REDACT_MIN_PIECE]
                .iter_mut()
                .for_each(|h| *h = true);
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut in_run = false;
    for (c, h) in chars.iter().zip(&hidden) {
        match (h, in_run) {
            (true, false) => out.push_str("[redacted]"),
            (true, true) => {}
            (false, _) => out.push(*c),
        }
        in_run = *h;
    }
    out
}

/// Where keys are kept on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    /// The keyring crate's platform store: Secret Service, macOS Keychain, Windows Credential
    /// Manager.
    Platform,
    /// Linux without a Secret Service (a server, CI, a bare window manager): the kernel's user
    /// keyring, shared by the user's processes until reboot.
    #[cfg(target_os = "linux")]
    Kernel,
}

fn choice() -> (Store, &'static str) {
    static CHOICE: std::sync::OnceLock<(Store, &'static str)> = std::sync::OnceLock::new();
    *CHOICE.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            let forced = std::env::var("KERF_KEYRING").ok();
            let secret_service = match forced.as_deref() {
                Some("kernel") => false,
                Some("secret-service") => true,
                _ => std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some() && reachable(),
            };
            if secret_service {
                (Store::Platform, "Secret Service")
            } else {
                (Store::Kernel, "kernel user (kept until reboot)")
            }
        }
        #[cfg(target_os = "macos")]
        {
            (Store::Platform, "macOS Keychain")
        }
        #[cfg(windows)]
        {
            (Store::Platform, "Windows Credential Manager")
        }
        #[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
        {
            (Store::Platform, "platform")
        }
    })
}

#[cfg(target_os = "linux")]
fn reachable() -> bool {
    keyring::Entry::new(SERVICE, "kerf-probe")
        .is_ok_and(|e| matches!(e.get_password(), Ok(_) | Err(keyring::Error::NoEntry)))
}

/// Which keyring holds keys on this machine.
pub fn store() -> &'static str {
    choice().1
}

/// The kernel's user keyring (keyutils), one `user` key per provider named `kerf:NAME`.
#[cfg(target_os = "linux")]
mod kernel {
    use linux_keyutils::{KeyError, KeyRing, KeyRingIdentifier};

    fn ring() -> Result<KeyRing, String> {
        KeyRing::from_special_id(KeyRingIdentifier::User, true).map_err(|e| format!("{e:?}"))
    }

    fn name(provider: &str) -> String {
        format!("kerf:{provider}")
    }

    pub fn set(provider: &str, key: &str) -> Result<(), String> {
        ring()?
            .add_key(&name(provider), key.as_bytes())
            .map(|_| ())
            .map_err(|e| format!("{e:?}"))
    }

    pub fn get(provider: &str) -> Option<String> {
        let bytes = ring()
            .ok()?
            .search(&name(provider))
            .ok()?
            .read_to_vec()
            .ok()?;
        String::from_utf8(bytes).ok()
    }

    pub fn delete(provider: &str) -> Result<bool, String> {
        match ring()?.search(&name(provider)) {
            Ok(k) => k.invalidate().map(|()| true).map_err(|e| format!("{e:?}")),
            // An invalidated key lingers as "revoked" until the kernel collects it: gone.
            Err(KeyError::KeyDoesNotExist | KeyError::KeyRevoked | KeyError::KeyExpired) => {
                Ok(false)
            }
            Err(e) => Err(format!("{e:?}")),
        }
    }
}

fn entry(provider: &str) -> Result<keyring::Entry> {
    keyring::Entry::new(SERVICE, provider)
        .map_err(|e| Error::Auth(format!("the {} keyring: {e}", store())))
}

fn keyring_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Auth(format!("{what} the {} keyring: {e}", store()))
}

/// Store `key` for `provider` in the keyring.
pub fn set_key(provider: &str, key: &str) -> Result<()> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::Auth("an empty key was given; nothing stored".into()));
    }
    match choice().0 {
        Store::Platform => entry(provider)?
            .set_password(key)
            .map_err(|e| keyring_error("could not store the key in", e)),
        #[cfg(target_os = "linux")]
        Store::Kernel => {
            kernel::set(provider, key).map_err(|e| keyring_error("could not store the key in", e))
        }
    }
}

/// Remove `provider`'s key from the keyring; `false` if there was none.
pub fn delete_key(provider: &str) -> Result<bool> {
    match choice().0 {
        Store::Platform => match entry(provider)?.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring::Error::NoEntry) => Ok(false),
            Err(e) => Err(keyring_error("could not remove the key from", e)),
        },
        #[cfg(target_os = "linux")]
        Store::Kernel => {
            kernel::delete(provider).map_err(|e| keyring_error("could not remove the key from", e))
        }
    }
}

fn from_keyring(provider: &str) -> Option<String> {
    match choice().0 {
        Store::Platform => entry(provider).ok()?.get_password().ok(),
        #[cfg(target_os = "linux")]
        Store::Kernel => kernel::get(provider),
    }
}

/// The key for `def`: keyring, then `def.key_env`, then the kind's standard variable
/// (`OPENAI_API_KEY`, …) — the last only when `def` points at the provider's own public
/// endpoint: a LAN or third-party server must be given a key explicitly (the keyring, or its own
/// `key_env`), or the user's real key would go to it. `Ok(None)` for a provider marked `no_key`;
/// an `auth` error naming every place looked at otherwise. A key found for a plain `http://`
/// endpoint off this machine is refused (`provider_config`) unless the provider allows it.
pub fn key_for(def: &ProviderDef) -> Result<Option<Key>> {
    let key = find_key(def)?;
    if key.is_some()
        && !def.allow_plain_http
        && crate::providers::is_plain_http_off_machine(&def.base_url)
    {
        return Err(Error::Config(format!(
            "refusing to send the key of provider `{}` over plain http:// to {} (anyone on the network path can read it): use https://, or re-add the provider with --allow-plain-http if you accept that",
            def.name, def.base_url
        )));
    }
    Ok(key)
}

/// Where `key_for` finds the key, before the transport check.
fn find_key(def: &ProviderDef) -> Result<Option<Key>> {
    if let Some(k) = from_keyring(&def.name) {
        return Ok(Some(Key {
            value: k,
            source: KeySource::Keyring,
        }));
    }
    let standard = def.kind.key_env();
    let own_endpoint =
        def.base_url.trim_end_matches('/') == def.kind.default_base_url().trim_end_matches('/');
    let vars: Vec<String> = def
        .key_env
        .iter()
        .cloned()
        .chain(own_endpoint.then(|| standard.to_string()))
        .collect();
    for v in &vars {
        if let Ok(k) = std::env::var(v)
            && !k.trim().is_empty()
        {
            return Ok(Some(Key {
                value: k.trim().to_string(),
                source: KeySource::Env(v.clone()),
            }));
        }
    }
    if def.no_key {
        return Ok(None);
    }
    let looked = if vars.is_empty() {
        String::new()
    } else {
        format!(" or in ${}", vars.join(" or $"))
    };
    let standard_note = if own_endpoint || def.key_env.as_deref() == Some(standard) {
        String::new()
    } else {
        format!(
            " (${standard} is used only for {}; to send it to {}, add the provider with --key-env {standard})",
            def.kind.default_base_url(),
            def.base_url
        )
    };
    Err(Error::Auth(format!(
        "no API key for provider `{}`: set one with `kerf providers set-key {}` (stored in the {} keyring){looked}{standard_note}",
        def.name,
        def.name,
        store(),
    )))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_print_and_echoes_are_scrubbed() {
        let k = Key {
            value: "sk-test-PLANTED-0123456789".into(),
            source: KeySource::Env("X".into()),
        };
        assert!(!format!("{k:?}").contains("PLANTED"));
        let echoed = "Incorrect API key provided: sk-test-PLANTED-0123456789. Also sk-test-PLA****6789 and …PLANTED-0123456789";
        let clean = redact(echoed, Some(&k));
        assert!(
            !clean.contains("PLANTED") && !clean.contains("23456789"),
            "{clean}"
        );
    }

    /// Security review, finding 10: a key quoted without its first or last characters leaked
    /// (only prefixes and suffixes of 8+ characters were removed).
    #[test]
    fn a_key_quoted_without_its_first_or_last_characters_is_redacted() {
        let k = Key::new("sk-proj-AbCdEf0123456789XyZ", KeySource::Env("X".into()));
        for quoted in [
            "key k-proj-AbCdEf0123456789Xy was rejected",
            "middle: AbCdEf0123 end",
            "tail 456789XyZ",
            "twice sk-proj-AbCdEf and 0123456789XyZ",
        ] {
            let clean = redact(quoted, Some(&k));
            assert!(clean.contains("[redacted]"), "{quoted} -> {clean}");
            for piece in k
                .expose()
                .chars()
                .collect::<Vec<_>>()
                .windows(REDACT_MIN_PIECE)
            {
                let piece: String = piece.iter().collect();
                assert!(
                    !clean.contains(&piece),
                    "{quoted} -> {clean} still holds {piece}"
                );
            }
        }
        // Text that shares nothing with the key is untouched; a short key goes whole.
        assert_eq!(redact("nothing here", Some(&k)), "nothing here");
        let short = Key::new("abc12", KeySource::Env("X".into()));
        assert_eq!(redact("x abc12 y", Some(&short)), "x [redacted] y");
    }
}
