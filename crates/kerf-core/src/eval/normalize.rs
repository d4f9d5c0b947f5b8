//! How two values are judged the same: text normalisation and string similarity.
//!
//! Normalisation (on by default, `match.normalize`): Unicode NFKC, full case folding, every run
//! of whitespace and punctuation collapsed to one space, surrounding quotes gone with the rest of
//! the punctuation, and a leading article (`the`, `a`, `an`) removed when something follows it.
//! So `"The  Northern-Lighthouse Board."` and `northern lighthouse board` are the same name.
//!
//! Similarity is the normalised Levenshtein similarity of the two texts (strsim: 1 − edits ÷ the
//! longer length in characters), the measure `fuzzy` thresholds; free-text agreement uses the
//! Sørensen–Dice coefficient of character bigrams (strsim), which is linear in the text length
//! and forgiving of reordered clauses.

use serde_json::Value;
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// Whether `c` separates words for matching: whitespace, or Unicode punctuation (any `P*`
/// category: dashes, quotes, brackets, full stops, …).
pub(crate) fn is_separator(c: char) -> bool {
    if c.is_ascii() {
        // The ASCII characters in Unicode's punctuation categories (`$+<=>^`|~` are symbols).
        return c.is_whitespace()
            || matches!(
                c,
                '!' | '"'
                    | '#'
                    | '%'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | ','
                    | '-'
                    | '.'
                    | '/'
                    | ':'
                    | ';'
                    | '?'
                    | '@'
                    | '['
                    | '\\'
                    | ']'
                    | '_'
                    | '{'
                    | '}'
            );
    }
    c.is_whitespace() || is_punctuation(c)
}

/// Whether `c` is written in a script that puts no spaces between words (Han, kana, Hangul,
/// Thai, Lao, Myanmar, Khmer): grounding reads each such character, with the marks that follow
/// it ([`joins_previous`]), as a word of its own, so a name is found inside a sentence written
/// without spaces (`東京` in `東京と大阪`), as exactly as a word between spaces is.
pub(crate) fn stands_alone(c: char) -> bool {
    matches!(c as u32,
        0x0E00..=0x0EFF // Thai, Lao
        | 0x1000..=0x109F // Myanmar
        | 0x1100..=0x115F // Hangul leading consonants (the vowels and finals join them)
        | 0x1780..=0x17FF // Khmer
        | 0x2E80..=0x2FDF // CJK and Kangxi radicals
        | 0x3005..=0x3007 // 々 〆 〇
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3100..=0x312F // Bopomofo
        | 0x3130..=0x318F // Hangul compatibility jamo
        | 0x31F0..=0x31FF // Katakana phonetic extensions
        | 0x3400..=0x4DBF // CJK Unified Ideographs Extension A
        | 0x4E00..=0x9FFF // CJK Unified Ideographs
        | 0xA960..=0xA97F // Hangul Jamo Extended-A (leading consonants)
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK Compatibility Ideographs
        | 0xFF66..=0xFF9D // Halfwidth Katakana (its sound marks join the kana before)
        | 0x1B000..=0x1B16F // Kana Supplement, Extended-A, Small Kana Extension
        | 0x20000..=0x3FFFF // CJK Unified Ideographs Extensions B and after
    ) && !joins_previous(c)
}

/// Whether `c` belongs to the character before it: a combining mark (a kana's sound mark, a
/// Thai vowel sign, a variation selector), a half-width sound mark, a Hangul vowel or final
/// written as a jamo. NFKC may fold it into that character, so grounding never makes it a
/// word apart from it.
pub(crate) fn joins_previous(c: char) -> bool {
    if c.is_ascii() {
        return false;
    }
    matches!(c as u32, 0xFF9E..=0xFF9F | 0x1160..=0x11FF | 0xD7B0..=0xD7FF)
        || matches!(
            get_general_category(c),
            GeneralCategory::NonspacingMark
                | GeneralCategory::SpacingMark
                | GeneralCategory::EnclosingMark
        )
}

/// `s` with each character that [`stands_alone`] made a word (with the marks that join it): a
/// space put between it and what is beside it, where there is none. Borrowed when there is
/// nothing to space.
pub(crate) fn spaced(s: &str) -> std::borrow::Cow<'_, str> {
    if s.is_ascii() || !s.chars().any(stands_alone) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + s.len() / 2);
    let mut after_alone = false;
    for c in s.chars() {
        let joins = after_alone && joins_previous(c);
        let alone = stands_alone(c);
        if !joins
            && (alone || after_alone)
            && !c.is_whitespace()
            && out.chars().next_back().is_some_and(|p| !p.is_whitespace())
        {
            out.push(' ');
        }
        out.push(c);
        after_alone = alone || joins;
    }
    std::borrow::Cow::Owned(out)
}

/// Text as grounding reads it, a document or a value looked up in one: normalised when the
/// matching normalises, each character that [`stands_alone`] spaced as a word.
pub(crate) fn as_grounded(s: &str, normalise: bool) -> String {
    let text = if normalise {
        normalize(s)
    } else {
        s.to_string()
    };
    match spaced(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(spaced) => spaced,
    }
}

/// Words as similarity compares them: joined by a space, but for two that [`stands_alone`]
/// side by side, which their text wrote without one (the spaces [`spaced`] put there would
/// otherwise count as characters in common, and make a different name look close).
pub(crate) fn compact<'a>(words: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    let mut before: Option<&str> = None;
    for w in words {
        if before.is_some_and(|b| apart(b, w)) {
            out.push(' ');
        }
        out.push_str(w);
        before = Some(w);
    }
    out
}

/// [`compact`]'s text as characters, with each word's span there (in characters): the runs of
/// words a fuzzy lookup compares are its substrings.
pub(crate) type Compacted = (Vec<char>, Vec<(usize, usize)>);

/// The words as [`Compacted`].
pub(crate) fn compact_spans<'a>(words: impl IntoIterator<Item = &'a str>) -> Compacted {
    let (mut joined, mut spans) = (Vec::new(), Vec::new());
    let mut before: Option<&str> = None;
    for w in words {
        if before.is_some_and(|b| apart(b, w)) {
            joined.push(' ');
        }
        before = Some(w);
        let start = joined.len();
        joined.extend(w.chars());
        spans.push((start, joined.len()));
    }
    (joined, spans)
}

/// Whether [`compact`] puts a space between the words `before` and `next`.
pub(crate) fn apart(before: &str, next: &str) -> bool {
    let alone = |w: &str| w.chars().next().is_some_and(stands_alone);
    !(alone(before) && alone(next))
}

/// Whether `c` is in one of Unicode's punctuation categories (`P*`).
fn is_punctuation(c: char) -> bool {
    matches!(
        get_general_category(c),
        GeneralCategory::ConnectorPunctuation
            | GeneralCategory::DashPunctuation
            | GeneralCategory::OpenPunctuation
            | GeneralCategory::ClosePunctuation
            | GeneralCategory::InitialPunctuation
            | GeneralCategory::FinalPunctuation
            | GeneralCategory::OtherPunctuation
    )
}

/// The text as matching compares it (see the module's documentation).
pub fn normalize(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    normalize_into(s, &mut out);
    out
}

/// [`normalize`], appended to `out` (which may already hold earlier fields of a tuple).
pub fn normalize_into(s: &str, out: &mut String) {
    let start = out.len();
    let push = |c: char, out: &mut String| {
        if is_separator(c) {
            if out.len() > start && !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    };
    if s.is_ascii() {
        // ASCII is its own NFKC form, and its case folding is ASCII lowercase.
        for c in s.chars() {
            push(c.to_ascii_lowercase(), out);
        }
    } else {
        let nfkc: String = s.nfkc().collect();
        for c in caseless::default_case_fold_str(&nfkc).chars() {
            push(c, out);
        }
    }
    if out.len() > start && out.ends_with(' ') {
        out.pop();
    }
    for article in ["the ", "a ", "an "] {
        let own = &out[start..];
        if own.len() > article.len() && own.starts_with(article) {
            out.drain(start..start + article.len());
            break;
        }
    }
}

/// A field's value as matching compares it: strings normalised (when `normalize`), numbers in
/// one spelling (`1`, `1.0` and `1e0` are the same number), other values as compact JSON.
pub fn value_text(v: &Value, normalize_text: bool) -> String {
    let mut out = String::new();
    value_text_into(v, normalize_text, &mut out);
    out
}

/// [`value_text`], appended to `out`.
pub fn value_text_into(v: &Value, normalize_text: bool, out: &mut String) {
    use std::fmt::Write;
    match v {
        Value::String(s) if normalize_text => normalize_into(s, out),
        Value::String(s) => out.push_str(s),
        Value::Number(n) => {
            let _ = match n.as_f64() {
                Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => write!(out, "{}", f as i64),
                Some(f) => write!(out, "{f}"),
                None => write!(out, "{n}"),
            };
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// Similarity of two compared texts in 0..=1: 1 exactly when they are equal.
pub fn similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    strsim::normalized_levenshtein(a, b)
}

/// Whether `a` and `b` can reach `threshold` similarity at all, from their lengths alone (the
/// edits are at least the difference in length): most pairs are ruled out without a distance.
pub fn may_reach(a: &str, b: &str, threshold: f64) -> bool {
    let (la, lb) = (a.chars().count(), b.chars().count());
    let longer = la.max(lb);
    longer == 0 || (1.0 - la.abs_diff(lb) as f64 / longer as f64) >= threshold
}

/// Agreement of two free texts in 0..=1: the Sørensen–Dice coefficient of their character
/// bigrams (as a multiset, like strsim's `sorensen_dice`, whose whitespace handling it follows).
/// Bigrams are packed into integers and counted by sorting, not hashing: scoring a dataset
/// computes this for every matched pair, and the hashed version was most of the time.
pub fn agreement(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let (ca, cb): (Vec<char>, Vec<char>) = (
        a.chars().filter(|c| !c.is_whitespace()).collect(),
        b.chars().filter(|c| !c.is_whitespace()).collect(),
    );
    if ca == cb {
        return 1.0;
    }
    fn bigrams(chars: &[char]) -> Vec<u64> {
        let mut out: Vec<u64> = chars
            .windows(2)
            .map(|w| (u64::from(w[0]) << 32) | u64::from(w[1]))
            .collect();
        out.sort_unstable();
        out
    }
    let (x, y) = (bigrams(&ca), bigrams(&cb));
    if x.is_empty() || y.is_empty() {
        return 0.0;
    }
    let (mut i, mut j, mut shared) = (0, 0, 0usize);
    while i < x.len() && j < y.len() {
        match x[i].cmp(&y[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                i += 1;
                j += 1;
            }
        }
    }
    2.0 * shared as f64 / (x.len() + y.len()) as f64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    #[test]
    fn normalises_case_space_punctuation_quotes_and_articles() {
        assert_eq!(
            normalize("  The  Northern-Lighthouse Board. "),
            "northern lighthouse board"
        );
        assert_eq!(normalize("\u{201c}Ada Lovelace\u{201d}"), "ada lovelace");
        assert_eq!(normalize("'a'"), "a");
        assert_eq!(normalize("An apple"), "apple");
        assert_eq!(normalize("Theory"), "theory");
        // NFKC: the ligature and the full-width letters are the plain ones; ß folds to ss.
        assert_eq!(normalize("ﬁeld ＡＢ Straße"), "field ab strasse");
    }

    #[test]
    fn characters_of_unspaced_scripts_are_words_of_their_own() {
        assert_eq!(spaced("東京と大阪"), "東 京 と 大 阪");
        assert_eq!(spaced("in 東京, at noon"), "in 東 京 , at noon");
        assert_eq!(spaced("Tokyo東京Osaka"), "Tokyo 東 京 Osaka");
        assert_eq!(spaced(" 東 "), " 東 ");
        // Marks stay with the character they follow: a half-width kana's sound mark, a kana's
        // combining one, a variation selector, Hangul written as jamo.
        assert_eq!(spaced("東京ｶﾞｽ"), "東 京 ｶﾞ ｽ");
        assert_eq!(spaced("か\u{3099}き"), "か\u{3099} き");
        assert_eq!(spaced("葛\u{e0100}城"), "葛\u{e0100} 城");
        assert_eq!(
            spaced("\u{1112}\u{1161}\u{11ab}\u{1100}\u{1173}\u{11af}"),
            "\u{1112}\u{1161}\u{11ab} \u{1100}\u{1173}\u{11af}"
        );
        // Similarity reads them together again.
        assert_eq!(
            compact("北 京 大 学 in Beijing".split_whitespace()),
            "北京大学 in Beijing"
        );
        assert!(matches!(
            spaced("plain words, café"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn ascii_separators_are_exactly_the_punctuation_categories() {
        for c in (0u8..128).map(char::from) {
            let unicode = c.is_whitespace() || is_punctuation(c);
            assert_eq!(is_separator(c), unicode, "{c:?}");
        }
    }

    #[test]
    fn numbers_have_one_spelling() {
        let n = |s: &str| value_text(&serde_json::from_str(s).unwrap(), true);
        assert_eq!(n("1"), n("1.0"));
        assert_eq!(n("0.5"), "0.5");
        assert_eq!(n("true"), "true");
    }

    #[test]
    fn agreement_is_strsims_sorensen_dice() {
        for (a, b) in [
            ("the green pigment", "a green pigment absorbing light"),
            ("night", "nacht"),
            ("aaaa", "aa"),
            ("ab", "cd"),
            ("a", "a b"),
            ("a b", "ab"),
        ] {
            let ours = agreement(a, b);
            let theirs = strsim::sorensen_dice(a, b);
            assert!(
                (ours - theirs).abs() < 1e-12,
                "{a} / {b}: {ours} vs {theirs}"
            );
        }
    }

    #[test]
    fn length_bound_never_rules_out_a_pair_that_reaches_the_threshold() {
        for (a, b) in [
            ("chloroplast", "chloroplasts"),
            ("kitten", "sitting"),
            ("", ""),
        ] {
            let s = similarity(a, b);
            assert!(may_reach(a, b, s), "{a} {b} {s}");
        }
    }
}
