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

    /// The estimate for `model`'s `usage`: its own entry, else the longest entry it starts with.
    pub fn estimate(&self, model: &str, usage: &Usage) -> Option<Cost> {
        let (name, (price, source)) = self.models.get_key_value(model).or_else(|| {
            self.models
                .iter()
                .filter(|(k, _)| model.starts_with(k.as_str()))
                .max_by_key(|(k, _)| k.len())
        })?;
        let usd = (f64::from(usage.prompt_tokens) * price.input
            + f64::from(usage.completion_tokens) * price.output)
            / 1e6;
        Some(Cost {
            usd,
            matched: name.clone(),
            price: *price,
            source: source.clone(),
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

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
        std::fs::write(&user, r#"{"models": {"x": {"input": "cheap"}}}"#).unwrap();
        let e = Prices::load_with(Some(user)).unwrap_err().to_string();
        assert!(
            e.contains("prices.json") && e.contains("models.x.input"),
            "{e}"
        );
    }
}
