#![no_main]
//! The streaming redactor on arbitrary keys, texts and cuts: the pieces redacted as they come
//! are the whole text redacted, no released piece holds six characters of the key, and the
//! whole is the plain definition (every run of the key's windows is one `[redacted]`).
use kerf_llm::secrets::{Key, KeySource, Redactor, redact, REDACT_MIN_PIECE};
use libfuzzer_sys::fuzz_target;

/// Redaction by its plain definition, the whole text at once.
fn plain(text: &str, key: &[char]) -> String {
    let width = key.len().min(REDACT_MIN_PIECE);
    if width == 0 {
        return text.to_string();
    }
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

fuzz_target!(|data: &[u8]| {
    // The first byte: the key's length (in characters, from what follows); the rest, the key
    // and then the text, whose bytes also choose where it is cut.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let all = String::from_utf8_lossy(rest);
    let chars: Vec<char> = all.chars().collect();
    let n = (n as usize % 40).min(chars.len());
    let key: String = chars[..n].iter().collect();
    let text: String = chars[n..].iter().collect();
    if key.trim().is_empty() {
        return;
    }
    let k = Key::new(key.clone(), KeySource::Env("FUZZ".into()));
    let whole = redact(&text, Some(&k));
    let key_chars: Vec<char> = k.expose().chars().collect();
    assert_eq!(whole, plain(&text, &key_chars));
    let mut r = Redactor::new(Some(&k));
    let mut out = String::new();
    let mut at = 0;
    let text_chars: Vec<char> = text.chars().collect();
    while at < text_chars.len() {
        let step = 1 + (text_chars[at] as usize % 7);
        let end = (at + step).min(text_chars.len());
        let piece: String = text_chars[at..end].iter().collect();
        out.push_str(&r.push(&piece));
        at = end;
    }
    out.push_str(&r.finish());
    assert_eq!(out, whole);
});
