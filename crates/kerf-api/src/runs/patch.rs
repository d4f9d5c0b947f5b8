//! A rerun's changes as a typed patch: each field the person gave replaces one setting of the
//! stored [`RunParams`]; what they did not give stays as it ran. The CLI's `kerf history rerun`
//! flags fill one in field by field (no round trip through `kerf run`'s argv, so a value that
//! begins with `-` — a stop sequence `-->`, a negative seed offset — is a value, not a flag).

use super::{RunParams, SettingsPatch};

/// What to change on a stored run; `None` keeps the stored value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub provider: Option<String>,
    pub model: Option<String>,
    /// The settings declared in [`run_settings!`](crate::run_settings).
    pub settings: SettingsPatch,
    pub max_tokens: Option<u32>,
    pub constrain: Option<bool>,
}

impl Overrides {
    /// `params` with every given field replaced. A new provider drops a stored model id and
    /// structured mode (they named the old provider's model and modes) unless given too.
    pub fn apply(self, params: &mut RunParams) {
        let s = &mut params.settings;
        if let Some(p) = self.provider
            && p != s.provider
        {
            s.provider = p;
            s.model = None;
            s.structured = None;
        }
        if let Some(m) = self.model {
            s.model = Some(m);
        }
        self.settings.apply(s);
        if let Some(v) = self.max_tokens {
            params.max_tokens = v;
        }
        if let Some(v) = self.constrain {
            params.constrain = v;
        }
    }
}
