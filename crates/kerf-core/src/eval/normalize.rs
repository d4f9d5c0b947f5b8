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
fn is_separator(c: char) -> bool {
    if c.is_ascii() {
        // The ASCII characters in Unicode's punctuation categories (`$+<=>^`|~` are symbols).
        return c.is_ascii_whitespace() || "!\"#%&'()*,-./:;?@[\\]_{}".contains(c);
    }
    c.is_whitespace()
        || matches!(
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
    let push = |c: char, out: &mut String| {
        if is_separator(c) {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    };
    if s.is_ascii() {
        // ASCII is its own NFKC form, and its case folding is ASCII lowercase.
        for c in s.chars() {
            push(c.to_ascii_lowercase(), &mut out);
        }
    } else {
        let nfkc: String = s.nfkc().collect();
        for c in caseless::default_case_fold_str(&nfkc).chars() {
            push(c, &mut out);
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    for article in ["the ", "a ", "an "] {
        if out.len() > article.len() && out.starts_with(article) {
            out.drain(..article.len());
            break;
        }
    }
    out
}

/// A field's value as matching compares it: strings normalised (when `normalize`), numbers in
/// one spelling (`1`, `1.0` and `1e0` are the same number), other values as compact JSON.
pub fn value_text(v: &Value, normalize_text: bool) -> String {
    match v {
        Value::String(s) if normalize_text => normalize(s),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            Some(f) => format!("{f}"),
            None => n.to_string(),
        },
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        other => other.to_string(),
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

/// Agreement of two free texts in 0..=1 (Sørensen–Dice of character bigrams).
pub fn agreement(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    strsim::sorensen_dice(a, b)
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
    fn numbers_have_one_spelling() {
        let n = |s: &str| value_text(&serde_json::from_str(s).unwrap(), true);
        assert_eq!(n("1"), n("1.0"));
        assert_eq!(n("0.5"), "0.5");
        assert_eq!(n("true"), "true");
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
