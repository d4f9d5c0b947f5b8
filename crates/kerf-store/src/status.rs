//! Where a run stands, and how a run's finish reason decides it.

use kerf_core::run::FinishReason;
use serde::{Deserialize, Serialize};

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[cfg_attr(feature = "ts", ts(rename = "RunStatus"))]
pub enum Status {
    /// Started; its text is being appended.
    Running,
    /// Handed to a provider that answers later (a batch API); no process streams it. Recovery
    /// leaves it alone; any later process may settle it.
    Submitted,
    /// Ended on its own (the model stopped, refused, or was filtered).
    Ok,
    /// Cut off by its token budget (or Kerf's reply size limit): never a complete answer.
    Truncated,
    /// Stopped part-way: cancelled, the stream broke, or the process died. The text is kept.
    Interrupted,
    /// Failed before or while replying.
    Error,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Running,
        Status::Submitted,
        Status::Ok,
        Status::Truncated,
        Status::Interrupted,
        Status::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Submitted => "submitted",
            Status::Ok => "ok",
            Status::Truncated => "truncated",
            Status::Interrupted => "interrupted",
            Status::Error => "error",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// The status of a run that ended with `reason`.
    pub fn for_finish(reason: FinishReason) -> Self {
        match reason {
            FinishReason::Length | FinishReason::SizeLimit => Status::Truncated,
            FinishReason::Cancelled | FinishReason::Interrupted => Status::Interrupted,
            FinishReason::Error => Status::Error,
            FinishReason::Stop | FinishReason::ContentFilter | FinishReason::Refusal => Status::Ok,
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}
