//! Estimated cost of a run: a per-model price table (US dollars per million input and output
//! tokens). Kerf ships one (`data/prices.json`); `prices.json` in Kerf's config directory, if
//! present, adds entries or replaces them — prices change, and users know their own contracts.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{Error, Result, Usage};

const SHIPPED: &str = include_str!("../data/prices.json");

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Dollars per million prompt tokens.
    pub input: f64,
    /// Dollars per million completion tokens (reasoning included: it is billed as output).
    pub output: f64,
}

#[derive(Debug, Deserialize)]
struct File {
    models: BTreeMap<String, Price>,
}

/// An estimate for one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    pub usd: f64,
    /// The table entry that priced it, and where that entry came from.
    pub matched: String,
    pub price: Price,
    pub source: String,
}

#[derive(Debug)]
pub struct Prices {
    models: BTreeMap<String, (Price, String)>,
}

impl Prices {
    /// The shipped table, overlaid by the user's `prices.json` if there is one.
    pub fn load() -> Result<Self> {
        let user = crate::providers::config_dir().join("prices.json");
        Self::load_with(Some(user))
    }

    pub fn load_with(user: Option<PathBuf>) -> Result<Self> {
        let shipped: File = serde_json::from_str(SHIPPED)
            .map_err(|e| Error::Config(format!("the shipped price table: {e}")))?;
        let mut models: BTreeMap<String, (Price, String)> = shipped
            .models
            .into_iter()
            .map(|(k, p)| (k, (p, "Kerf's table".to_string())))
            .collect();
        if let Some(path) = user
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            let de = &mut serde_json::Deserializer::from_str(&text);
            let file: File = serde_path_to_error::deserialize(de).map_err(|e| {
                Error::Config(format!(
                    "{}: {} (at {})",
                    path.display(),
                    e.inner(),
                    e.path()
                ))
            })?;
            for (k, p) in file.models {
                models.insert(k, (p, path.display().to_string()));
            }
        }
        Ok(Prices { models })
    }

    /// The table entry for `model`, if the table prices it: its own entry, else the entry of its
    /// family — the same model under a dated snapshot or channel name (`gpt-4o-mini-2024-07-18`,
    /// `claude-opus-4-5-20251101`, `gemini-3-pro-preview`, `claude-opus-4-5@20251101`). A model
    /// never borrows a neighbour's price: `claude-opus-4-5` is not `claude-opus-4`, nor
    /// `gpt-4.1-mini` `gpt-4.1`. A router's `vendor/model` form is looked up by its last part.
    pub fn price(&self, model: &str) -> Option<(&str, Price, &str)> {
        let found = |id: &str| {
            self.models.get_key_value(id).or_else(|| {
                self.models
                    .iter()
                    .filter(|(k, _)| id.strip_prefix(k.as_str()).is_some_and(is_snapshot_suffix))
                    .max_by_key(|(k, _)| k.len())
            })
        };
        let (name, (price, source)) =
            found(model).or_else(|| model.rsplit_once('/').and_then(|(_, id)| found(id)))?;
        Some((name.as_str(), *price, source.as_str()))
    }

    /// The estimate for `model`'s `usage`, priced as [`Prices::price`] finds it.
    pub fn estimate(&self, model: &str, usage: &Usage) -> Option<Cost> {
        let (name, price, source) = self.price(model)?;
        let usd = (f64::from(usage.prompt_tokens) * price.input
            + f64::from(usage.completion_tokens) * price.output)
            / 1e6;
        Some(Cost {
            usd,
            matched: name.to_string(),
            price,
            source: source.to_string(),
        })
    }
}

/// Whether what follows a table entry in a model id names a snapshot or channel of that same
/// model rather than another model: `@anything` (Vertex's form), or `-` then parts that are each
/// `latest`, `preview`, `exp…`, a date (`2024-07-18`, `20251101`, `06-05`, `09-2025`) or a
/// three-digit revision (`002`). A one-digit part is a version (`-5` in `claude-opus-4-5`), and a
/// word (`-mini`, `-lite`) is another model.
fn is_snapshot_suffix(rest: &str) -> bool {
    if rest.starts_with('@') {
        return rest.len() > 1;
    }
    let Some(rest) = rest.strip_prefix('-') else {
        return false;
    };
    let mut parts = rest.split('-').peekable();
    parts.peek().is_some()
        && parts.all(|p| {
            let digits = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
            matches!(p, "latest" | "preview")
                || p.starts_with("exp")
                || (digits && matches!(p.len(), 2 | 3 | 4 | 8))
        })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_suffixes_are_told_from_other_models() {
        for same in [
            "-2024-07-18",
            "-20250929",
            "-latest",
            "-preview",
            "-preview-06-05",
            "-preview-09-2025",
            "-002",
            "-exp-1206",
            "@20251101",
        ] {
            assert!(is_snapshot_suffix(same), "{same}");
        }
        for other in [
            "",
            "-",
            "@",
            "-5",
            "-mini",
            "-lite",
            ".1",
            "-4-5",
            "mini",
            "-pro-preview",
        ] {
            assert!(!is_snapshot_suffix(other), "{other}");
        }
    }

    #[test]
    fn dated_ids_match_their_family_and_user_entries_win() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("prices.json");
        std::fs::write(
            &user,
            r#"{"models": {"gpt-4o-mini": {"input": 1.0, "output": 2.0}}}"#,
        )
        .unwrap();
        let usage = Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 500_000,
            reasoning_tokens: None,
        };
        let shipped = Prices::load_with(None).unwrap();
        let c = shipped.estimate("gpt-4o-mini-2024-07-18", &usage).unwrap();
        assert_eq!(c.matched, "gpt-4o-mini", "the longest prefix, not gpt-4o");
        assert!((c.usd - (0.15 + 0.30)).abs() < 1e-9);
        let mine = Prices::load_with(Some(user.clone())).unwrap();
        let c = mine.estimate("gpt-4o-mini", &usage).unwrap();
        assert!((c.usd - 2.0).abs() < 1e-9 && c.source.ends_with("prices.json"));
        assert!(shipped.estimate("smollm2", &usage).is_none());
        // A family is priced as itself, never as the family its name happens to start with.
        let opus = shipped.estimate("claude-opus-4-5", &usage).unwrap();
        assert_eq!(opus.matched, "claude-opus-4-5");
        assert!((opus.price.input - 5.0).abs() < 1e-9 && (opus.price.output - 25.0).abs() < 1e-9);
        let dated = shipped
            .estimate("claude-opus-4-5-20251101", &usage)
            .unwrap();
        assert_eq!(dated.matched, "claude-opus-4-5");
        let vertex = shipped.price("claude-opus-4-5@20251101").unwrap();
        assert_eq!(vertex.0, "claude-opus-4-5");
        let routed = shipped.price("openai/gpt-4o-mini").unwrap();
        assert_eq!(routed.0, "gpt-4o-mini");
        for unknown in [
            "claude-opus-9",
            "gpt-4o-turbo",
            "gpt-4.1-micro",
            "claude-opus-4-9",
        ] {
            assert!(
                shipped.price(unknown).is_none(),
                "{unknown} borrowed a price"
            );
        }
        std::fs::write(&user, r#"{"models": {"x": {"input": "cheap"}}}"#).unwrap();
        let e = Prices::load_with(Some(user)).unwrap_err().to_string();
        assert!(
            e.contains("prices.json") && e.contains("models.x.input"),
            "{e}"
        );
    }
}
