//! What the Export screen shows.

use serde::Serialize;
use ts_rs::TS;

use super::ExportTarget;

/// A prompt in a production shape.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ExportView {
    pub target: ExportTarget,
    /// The text to copy or save.
    pub text: String,
    /// Changes made on the way, and what the target cannot express.
    pub notes: Vec<String>,
    /// The file name a save suggests.
    pub file_name: String,
}
