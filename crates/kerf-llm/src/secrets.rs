//! API keys: the OS keyring first (`kerf providers set-key NAME`), then environment variables
//! (the provider's own `key_env`, then the kind's standard one: `OPENAI_API_KEY`,
//! `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`). A [`Key`] never prints itself, and [`redact`] scrubs
//! it from any text that might echo it (a provider's error message, a transport error).
//!
//! On Linux the keyring is the desktop's Secret Service (GNOME Keyring, KWallet) when a session
//! bus offers one, else the kernel's keyutils keyring — which keeps keys only until logout or
//! reboot; [`store`] says which is in use so the CLI can tell the user.

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
    pub fn expose(&self) -> &str {
        &self.value
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key(from {})", self.source)
    }
}

/// Replace every occurrence of `key` in `text` (and of any 8+ character piece a server might
/// quote back, such as a masked `sk-abc…xyz`) with `[redacted]`.
pub fn redact(text: &str, key: Option<&Key>) -> String {
    let Some(key) = key.map(Key::expose).filter(|k| k.len() >= 8) else {
        return text.to_string();
    };
    let mut out = text.replace(key, "[redacted]");
    // Prefixes and suffixes of 8+ characters, as error messages quote them.
    let chars: Vec<char> = key.chars().collect();
    for n in (8..chars.len()).rev() {
        let head: String = chars[..n].iter().collect();
        let tail: String = chars[chars.len() - n..].iter().collect();
        out = out
            .replace(&head, "[redacted]")
            .replace(&tail, "[redacted]");
    }
    out
}

#[cfg(target_os = "linux")]
mod store_choice {
    use std::sync::OnceLock;

    /// Secret Service when reachable, else keyutils; decided once per process.
    pub fn init() -> &'static str {
        static CHOICE: OnceLock<&'static str> = OnceLock::new();
        CHOICE.get_or_init(|| {
            let forced = std::env::var("KERF_KEYRING").ok();
            let secret_service = match forced.as_deref() {
                Some("keyutils") => false,
                Some("secret-service") => true,
                _ => std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some() && reachable(),
            };
            if secret_service {
                keyring::set_default_credential_builder(
                    keyring::secret_service::default_credential_builder(),
                );
                "Secret Service"
            } else {
                keyring::set_default_credential_builder(
                    keyring::keyutils::default_credential_builder(),
                );
                "kernel (keyutils, kept until logout)"
            }
        })
    }

    fn reachable() -> bool {
        let builder = keyring::secret_service::default_credential_builder();
        match builder.build(None, super::SERVICE, "kerf-probe") {
            Ok(c) => matches!(c.get_password(), Ok(_) | Err(keyring::Error::NoEntry)),
            Err(_) => false,
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod store_choice {
    pub fn init() -> &'static str {
        if cfg!(target_os = "macos") {
            "macOS Keychain"
        } else if cfg!(windows) {
            "Windows Credential Manager"
        } else {
            "platform"
        }
    }
}

/// Which keyring holds keys on this machine.
pub fn store() -> &'static str {
    store_choice::init()
}

fn entry(provider: &str) -> Result<keyring::Entry> {
    store();
    keyring::Entry::new(SERVICE, provider)
        .map_err(|e| Error::Auth(format!("the {} keyring: {e}", store())))
}

/// Store `key` for `provider` in the keyring.
pub fn set_key(provider: &str, key: &str) -> Result<()> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::Auth("an empty key was given; nothing stored".into()));
    }
    entry(provider)?.set_password(key).map_err(|e| {
        Error::Auth(format!(
            "could not store the key in the {} keyring: {e}",
            store()
        ))
    })
}

/// Remove `provider`'s key from the keyring; `false` if there was none.
pub fn delete_key(provider: &str) -> Result<bool> {
    match entry(provider)?.delete_credential() {
        Ok(()) => Ok(true),
        Err(keyring::Error::NoEntry) => Ok(false),
        Err(e) => Err(Error::Auth(format!("the {} keyring: {e}", store()))),
    }
}

fn from_keyring(provider: &str) -> Option<String> {
    entry(provider).ok()?.get_password().ok()
}

/// The key for `def`: keyring, then `def.key_env`, then the kind's variable. `Ok(None)` for a
/// provider marked `no_key`; an `auth` error naming every place looked at otherwise.
pub fn key_for(def: &ProviderDef) -> Result<Option<Key>> {
    if let Some(k) = from_keyring(&def.name) {
        return Ok(Some(Key {
            value: k,
            source: KeySource::Keyring,
        }));
    }
    let vars: Vec<String> = def
        .key_env
        .iter()
        .cloned()
        .chain(std::iter::once(def.kind.key_env().to_string()))
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
    Err(Error::Auth(format!(
        "no API key for provider `{}`: set one with `kerf providers set-key {}` (stored in the {} keyring) or in ${}",
        def.name,
        def.name,
        store(),
        vars.join(" or $")
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
}
