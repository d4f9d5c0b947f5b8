//! Which models and devices a run can use, as the run panel lists them.

use serde::Serialize;
use ts_rs::TS;

/// A GPU (or the CPU) llama.cpp can run on.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct DeviceInfo {
    pub name: String,
    pub description: String,
    pub kind: String,
    #[ts(type = "number")]
    pub memory_total: u64,
    #[ts(type = "number")]
    pub memory_free: u64,
}

/// Which models and providers a run can use.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Models {
    /// GGUF files in Kerf's models folder.
    pub local: Vec<String>,
    /// Configured cloud providers (`kerf providers add`).
    pub providers: Vec<String>,
    pub devices: Vec<DeviceInfo>,
    /// Whether this build has the local engine.
    pub engine: bool,
    /// Why devices could not be listed, if they could not.
    pub devices_error: Option<String>,
}
