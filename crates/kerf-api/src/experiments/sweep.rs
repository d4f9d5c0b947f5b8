//! Sweeps: replies cut at every offset, each cut parsed as a cut-off stream would be (`kerf
//! sweep`). A sweep calls no model; it is kept in the history as one experiment, its spec naming
//! the replies by size and hash, its result the curves.

use std::path::Path;

use kerf_core::Parser;
use kerf_core::sweep::{self, Sweep, Unit};
use kerf_llm::CancelToken;
use kerf_store::Store;
use serde::{Deserialize, Serialize};

use super::ExperimentSpec;
use super::spec::{CutUnit, SweepSpec, SweptReply};
use crate::error::Result;

/// One reply to sweep: its name, how it is parsed, and its text.
pub struct Reply {
    pub name: String,
    pub parser: Parser,
    pub text: String,
}

/// Where a sweep stands: each reply is cut into its units, then parsed once with every cut
/// counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Cutting,
    Counting,
}

/// What `kerf sweep --json` prints and the history keeps: one reply's curve, or several named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SweepReport {
    One(Sweep),
    Compare { compare: Vec<NamedSweep> },
}

/// A sweep's curves are its result; lists show none of it.
impl super::lifecycle::Reported for SweepReport {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NamedSweep {
    pub name: String,
    pub sweep: Sweep,
}

impl CutUnit {
    /// The cuts of `text` in this unit (token cuts by `tokenizer`: a vocabulary's name, or a
    /// GGUF model's path).
    pub fn cuts(self, tokenizer: &str, text: &str) -> Result<Unit> {
        Ok(match self {
            CutUnit::Byte => Unit::Byte,
            CutUnit::Char => Unit::Char,
            CutUnit::Token => token_unit(tokenizer, text)?,
        })
    }
}

/// Token cuts from a named tiktoken vocabulary, or from a GGUF model's own tokenizer (a path
/// ending in `.gguf`: cuts fall where that model's tokens end).
pub fn token_unit(tokenizer: &str, text: &str) -> Result<Unit> {
    if tokenizer.ends_with(".gguf") {
        let path = Path::new(tokenizer);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| tokenizer.to_string());
        return Ok(Unit::Token {
            name,
            boundaries: kerf_llama::token_boundaries(path, text)?,
        });
    }
    Ok(kerf_core::sweep::token_unit(tokenizer, text)?)
}

/// Sweep every reply in `unit`, kept in `history` when given. `on_step` hears each reply's two
/// steps begin (a long reply takes seconds); Ctrl-C (`cancel`) stops between cuts.
pub fn sweep(
    history: Option<&Store>,
    replies: &[Reply],
    unit: CutUnit,
    tokenizer: &str,
    cancel: &CancelToken,
    on_step: &mut dyn FnMut(&Reply, Step),
) -> Result<(Vec<Sweep>, SweepReport)> {
    let vars = serde_json::Map::new();
    let mut sweeps = Vec::with_capacity(replies.len());
    for r in replies {
        on_step(r, Step::Cutting);
        let cuts = unit.cuts(tokenizer, &r.text)?;
        on_step(r, Step::Counting);
        sweeps.push(sweep::sweep(&r.parser, &r.text, &vars, &cuts, cancel)?);
    }
    let report = match sweeps.as_slice() {
        [one] => SweepReport::One(one.clone()),
        _ => SweepReport::Compare {
            compare: replies
                .iter()
                .zip(&sweeps)
                .map(|(r, s)| NamedSweep {
                    name: r.name.clone(),
                    sweep: s.clone(),
                })
                .collect(),
        },
    };
    if let Some(store) = history {
        let spec = ExperimentSpec::Sweep(SweepSpec {
            replies: replies
                .iter()
                .map(|r| SweptReply {
                    name: r.name.clone(),
                    bytes: r.text.len(),
                    response_type: r.parser.response_type(),
                    sha256: kerf_store::sha256_hex(r.text.as_bytes()),
                })
                .collect(),
            unit,
            tokenizer: tokenizer.to_string(),
        });
        // A sweep's cuts are made before it is kept: it begins and ends at once.
        super::lifecycle::begin(store, &spec)?.settled(Ok(&report))?;
    }
    Ok((sweeps, report))
}
