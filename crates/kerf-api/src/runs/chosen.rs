//! The provider a run goes to ([`Chosen`]): the local engine, a configured cloud or server
//! one, or a transcript played back in tests.

use super::*;

/// The provider a run goes to: the local engine or a configured cloud/server one (or, in tests,
/// a transcript played back: see `kerf_llm::scripted`).
pub enum Chosen {
    Local(LocalProvider),
    Cloud(Box<CloudProvider>),
    Scripted(Box<kerf_llm::scripted::Scripted>),
}

impl Chosen {
    pub fn as_provider(&self) -> &dyn Provider {
        match self {
            Chosen::Local(p) => p,
            Chosen::Cloud(p) => p.as_ref(),
            Chosen::Scripted(p) => p.as_ref(),
        }
    }

    /// `local`, or the configured provider's name.
    pub fn name(&self) -> String {
        match self {
            Chosen::Local(_) => "local".into(),
            Chosen::Cloud(p) => p.def.name.clone(),
            Chosen::Scripted(p) => p.name().into(),
        }
    }

    /// Where its replies come from, as its runs' details record it: the cache
    /// (`kerf eval --cache`) reuses only replies from the same endpoint.
    pub fn endpoint(&self) -> kerf_store::Endpoint {
        match self {
            Chosen::Cloud(p) => kerf_store::Endpoint {
                protocol: Some(p.def.kind.as_str().to_string()),
                base_url: Some(p.def.base_url.clone()),
                served_model: p.served_model_known(),
            },
            Chosen::Local(_) | Chosen::Scripted(_) => kerf_store::Endpoint::default(),
        }
    }

    /// The GGUF file of a local run (its tokenizer cuts sweeps at the model's token boundaries).
    pub fn gguf(&self) -> Option<PathBuf> {
        match self {
            Chosen::Local(p) => Some(PathBuf::from(p.model())),
            Chosen::Cloud(_) | Chosen::Scripted(_) => None,
        }
    }

    /// Whether this provider can hold `prompt`'s output to its schema: llguidance locally; a
    /// structured-output mode the provider honours in the cloud (none for JSONL anywhere).
    pub fn can_constrain(&self, prompt: &Prompt) -> bool {
        let constraint = constraint_for(prompt);
        match self {
            Chosen::Cloud(p) => p.mode_for(&constraint).0 != Structured::None,
            Chosen::Local(_) => constraint != Constraint::None,
            Chosen::Scripted(p) => p.supports(&constraint),
        }
    }

    /// The price of this provider's model per million tokens, where the price table knows it
    /// (the local engine is free).
    pub fn price(&self) -> Result<Option<kerf_llm::prices::Price>> {
        Ok(match self {
            Chosen::Cloud(p) => kerf_llm::prices::Prices::load()?
                .price(&p.def.model)
                .map(|(_, price, _)| price),
            Chosen::Local(_) | Chosen::Scripted(_) => None,
        })
    }

    /// The estimated cost of a finished run from the price table (a local run costs nothing but
    /// electricity).
    pub fn cost(&self, f: &Finish) -> Result<Option<kerf_llm::prices::Cost>> {
        Ok(match self {
            // Usage the provider did not report (or that could not be read): the cost is
            // unknown, not the price of 0 prompt tokens.
            Chosen::Cloud(_) if !f.usage_reported() => None,
            Chosen::Cloud(p) => kerf_llm::prices::Prices::load()?.estimate(&p.def.model, &f.usage),
            Chosen::Local(_) | Chosen::Scripted(_) => None,
        })
    }
}
