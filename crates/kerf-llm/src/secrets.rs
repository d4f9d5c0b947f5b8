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
    let mut r = Redactor::new(key);
    let mut out = r.push(text);
    out.push_str(&r.finish());
    out
}

/// [`redact`] over a text that arrives in pieces (a streamed reply a server may echo the key
/// into, split anywhere): each piece gives back what can be released, the end the rest, and
/// the whole is exactly `redact` of the whole. A character is held back only while a window of
/// the key could still cover it — while the text's end is the start of a piece of the key — so
/// ordinary text streams through at once.
pub struct Redactor {
    /// The key's pieces of 1 to `width` characters (`width`: [`REDACT_MIN_PIECE`], or the
    /// key's length when shorter); empty without a key: everything passes. Pieces of `width`
    /// are what is hidden; the shorter ones are what a window to come could still begin with.
    pieces: std::collections::HashSet<Vec<char>>,
    /// The characters the key holds: a character it does not hold ends every window, so what
    /// came before it can be released at once (ordinary text passes through that way).
    chars: std::collections::HashSet<char>,
    /// `chars`, for ASCII, as a table (a reply is mostly ASCII: one look-up per character).
    ascii: [bool; 128],
    width: usize,
    /// Characters not yet released, each with whether a window hid it (at most `width`).
    held: Vec<(char, bool)>,
    /// Whether the last character released was hidden (a run of hidden characters is one
    /// `[redacted]`).
    in_run: bool,
}

impl Redactor {
    pub fn new(key: Option<&Key>) -> Redactor {
        let key: Vec<char> = key.map(Key::expose).unwrap_or_default().chars().collect();
        let width = key.len().min(REDACT_MIN_PIECE);
        Redactor {
            pieces: (1..=width)
                .flat_map(|len| key.windows(len).map(<[char]>::to_vec))
                .collect(),
            chars: key.iter().copied().collect(),
            ascii: std::array::from_fn(|i| key.iter().any(|&c| c as usize == i)),
            width,
            held: Vec::with_capacity(width + 1),
            in_run: false,
        }
    }

    /// Take `piece`; what can be released of the text so far, redacted.
    pub fn push(&mut self, piece: &str) -> String {
        if self.width == 0 {
            return piece.to_string();
        }
        let mut out = String::with_capacity(piece.len());
        let mut tail: Vec<char> = Vec::with_capacity(self.width);
        for c in piece.chars() {
            let in_key = match self.ascii.get(c as usize) {
                Some(&b) => b,
                None => self.chars.contains(&c),
            };
            if !in_key {
                // No window holds `c`: everything before it is final, and so is `c`.
                self.release(self.held.len(), &mut out);
                self.held.push((c, false));
                self.release(1, &mut out);
                continue;
            }
            self.held.push((c, false));
            let n = self.held.len();
            if n >= self.width {
                tail.clear();
                tail.extend(self.held[n - self.width..].iter().map(|(c, _)| *c));
                if self.pieces.contains(&tail) {
                    self.held[n - self.width..]
                        .iter_mut()
                        .for_each(|(_, h)| *h = true);
                }
            }
            // A character no window to come can cover is final: keep only the longest end of
            // the text, shorter than a window, that a piece of the key begins with.
            let n = self.held.len();
            let live = (1..self.width.min(n + 1))
                .rev()
                .find(|&len| {
                    tail.clear();
                    tail.extend(self.held[n - len..].iter().map(|(c, _)| *c));
                    self.pieces.contains(&tail)
                })
                .unwrap_or(0);
            self.release(n - live, &mut out);
        }
        out
    }

    /// The end of the text: the rest, redacted.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        self.release(self.held.len(), &mut out);
        out
    }

    /// Release the first `n` characters held.
    fn release(&mut self, n: usize, out: &mut String) {
        for (c, hidden) in self.held.drain(..n) {
            match (hidden, self.in_run) {
                (true, false) => out.push_str("[redacted]"),
                (true, true) => {}
                (false, _) => out.push(c),
            }
            self.in_run = hidden;
        }
    }
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

/// What a keyring entry holds from this version on: the key and the origin (scheme, host,
/// port) it was given for, so that a provider of the same name pointing elsewhere — another
/// config folder, a hand-edited `providers.json` — never receives it.
const BOUND: &str = "kerf-key-v2";

/// The origin of `base_url` (`https://api.openai.com`, `http://127.0.0.1:8080`): where a key
/// may go. A URL that does not parse is its own origin.
pub fn origin(base_url: &str) -> String {
    url::Url::parse(base_url)
        .ok()
        .map(|u| u.origin())
        .filter(url::Origin::is_tuple)
        .map_or_else(|| base_url.trim().to_string(), |o| o.ascii_serialization())
}

/// A keyring entry read back.
enum Stored {
    /// Given for this origin.
    Bound { origin: String, key: String },
    /// Stored by a Kerf before keys were tied to an address: no origin known.
    Legacy(String),
}

impl Stored {
    fn read(text: String) -> Stored {
        let mut parts = text.splitn(3, '\n');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(BOUND), Some(origin), Some(key)) => Stored::Bound {
                origin: origin.to_string(),
                key: key.to_string(),
            },
            _ => Stored::Legacy(text),
        }
    }
}

/// Store `key` for provider `def` in the keyring, tied to the origin of its base URL.
pub fn set_key(def: &ProviderDef, key: &str) -> Result<()> {
    let key = key.trim();
    if key.is_empty() {
        return Err(Error::Auth("an empty key was given; nothing stored".into()));
    }
    let value = format!("{BOUND}\n{}\n{key}", origin(&def.base_url));
    match choice().0 {
        Store::Platform => entry(&def.name)?
            .set_password(&value)
            .map_err(|e| keyring_error("could not store the key in", e)),
        #[cfg(target_os = "linux")]
        Store::Kernel => kernel::set(&def.name, &value)
            .map_err(|e| keyring_error("could not store the key in", e)),
    }
}

/// Tie the key stored for provider `def.name` (whatever origin it was given for) to `def`'s
/// origin: the user re-confirmed it for a provider that moved (`--keep-key`). Whether there was
/// one.
pub fn rebind_key(def: &ProviderDef) -> Result<bool> {
    match from_keyring(&def.name).map(Stored::read) {
        Some(Stored::Bound { key, .. } | Stored::Legacy(key)) => set_key(def, &key).map(|()| true),
        None => Ok(false),
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

/// Where `key_for` finds the key, before the transport check. A keyring key goes only to the
/// origin it was given for; one stored by an older Kerf (no origin) only to the kind's own
/// public endpoint, and is tied to it then.
fn find_key(def: &ProviderDef) -> Result<Option<Key>> {
    let standard = def.kind.key_env();
    let own_endpoint =
        def.base_url.trim_end_matches('/') == def.kind.default_base_url().trim_end_matches('/');
    let here = origin(&def.base_url);
    match from_keyring(&def.name).map(Stored::read) {
        Some(Stored::Bound { origin, key }) if origin == here => {
            return Ok(Some(Key {
                value: key,
                source: KeySource::Keyring,
            }));
        }
        Some(Stored::Bound { origin, .. }) => {
            return Err(Error::Auth(format!(
                "the key stored for provider `{}` was given for {origin}, and the provider now points at {here}: it is not sent there; `kerf providers set-key {}` stores a key for {here}",
                def.name, def.name
            )));
        }
        Some(Stored::Legacy(key)) if own_endpoint => {
            // Best effort: unbound, it is still sent only to the public endpoint.
            let _ = set_key(def, &key);
            return Ok(Some(Key {
                value: key,
                source: KeySource::Keyring,
            }));
        }
        Some(Stored::Legacy(_)) => {
            return Err(Error::Auth(format!(
                "the key stored for provider `{}` by an earlier Kerf is tied to no address, and the provider points at {here}, not {}: it is not sent there; `kerf providers set-key {}` stores it again, tied to {here}",
                def.name,
                def.kind.default_base_url(),
                def.name
            )));
        }
        None => {}
    }
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

    /// Redaction by its plain definition, the whole text at once.
    fn plain(text: &str, key: &[char]) -> String {
        let width = key.len().min(REDACT_MIN_PIECE);
        let windows: std::collections::HashSet<&[char]> = key.windows(width).collect();
        let chars: Vec<char> = text.chars().collect();
        let mut hidden = vec![false; chars.len()];
        for (i, w) in chars.windows(width).enumerate() {
            if windows.contains(w) {
                hidden[i..i + width].iter_mut().for_each(|h| *h = true);
            }
        }
        let mut out = String::new();
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

    /// A key is tied to scheme, host and port: the path does not matter, the port does; an
    /// entry written before keys had an origin reads as such.
    #[test]
    fn keys_are_tied_to_an_origin() {
        assert_eq!(
            origin("https://api.openai.com/v1"),
            "https://api.openai.com"
        );
        assert_eq!(
            origin("https://API.openai.com:443/v1/"),
            "https://api.openai.com"
        );
        assert_eq!(origin("http://127.0.0.1:8080/v1"), "http://127.0.0.1:8080");
        assert_ne!(
            origin("http://127.0.0.1:8080"),
            origin("http://127.0.0.1:8081")
        );
        assert!(matches!(
            Stored::read(format!("{BOUND}\nhttps://a.example\nsk-1")),
            Stored::Bound { origin, key } if origin == "https://a.example" && key == "sk-1"
        ));
        assert!(matches!(Stored::read("sk-old".into()), Stored::Legacy(k) if k == "sk-old"));
    }

    /// A key a server echoes into a streamed reply, split across pieces anywhere: the pieces
    /// redacted as they come give exactly the whole text redacted, and no piece holds six
    /// characters of the key (the reply was once stored and shown unredacted).
    #[test]
    fn a_streamed_text_is_redacted_as_the_whole_text_is_wherever_it_is_cut() {
        let k = Key::new("sk-proj-AbCdEf0123456789XyZ", KeySource::Env("X".into()));
        let text = "{\"entity\": \"sk-proj-AbCdEf0123456789XyZ\"} and 0123456789 — naïve AbCdEf";
        let whole = redact(text, Some(&k));
        assert!(
            !whole.contains("AbCdEf") && whole.contains("naïve"),
            "{whole}"
        );
        let chars: Vec<char> = text.chars().collect();
        for size in 1..=chars.len() {
            let mut r = Redactor::new(Some(&k));
            let mut out = String::new();
            for piece in chars.chunks(size) {
                let released = r.push(&piece.iter().collect::<String>());
                assert!(!released.contains("AbCdEf"), "{size}: {released}");
                out.push_str(&released);
            }
            out.push_str(&r.finish());
            assert_eq!(out, whole, "pieces of {size}");
        }
        // The same as the plain definition (every run of 6-character windows found in the key
        // is one `[redacted]`) on texts made of the key's pieces and other characters.
        let mut seed = 0x5eed_u64;
        let mut below = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let key: Vec<char> = k.expose().chars().collect();
        for _ in 0..300 {
            let mut text = String::new();
            for _ in 0..below(12) {
                if below(2) == 0 {
                    let from = below(key.len());
                    let len = 1 + below(key.len() - from);
                    text.extend(&key[from..from + len]);
                } else {
                    text.push_str(["x", " ", "é", "AbC", "01", "\n"][below(6)]);
                }
            }
            assert_eq!(redact(&text, Some(&k)), plain(&text, &key), "{text:?}");
        }
        // Without a key, every piece passes at once.
        let mut r = Redactor::new(None);
        assert_eq!(r.push("abc"), "abc");
        assert_eq!(r.finish(), "");
    }
}
