//! The evaluation lab's pure half: how records are matched ([`matching`], [`normalize`]), how one
//! document is scored ([`score`]), how a cut document's replies are placed in it and merged
//! ([`mentions`]), how scores add up over documents ([`aggregate`]), and the datasets they come
//! from ([`dataset`]).

pub mod aggregate;
pub mod dataset;
pub(crate) mod distance;
pub mod locate;
pub mod matching;
pub mod mentions;
pub mod normalize;
#[cfg(test)]
pub(crate) mod reference;
pub mod score;
pub mod stats;

pub use aggregate::{Tally, Totals, TypeTotals, score_all};
pub use matching::{MatchSpec, Matcher};
pub use score::{
    Agreement, Counts, Grounding, Metric, Pair, ScoreReport, Scored, Scores, identity, score,
};
