//! What a run can run on: the GGUF files in the workbench's models folder, the configured
//! providers, and the devices llama.cpp sees in this build.

use crate::workbench::Workbench;

pub mod pull;
pub mod wire;

use wire::{DeviceInfo, Models};

/// GGUF files, configured providers and llama.cpp's devices.
pub fn models(wb: &Workbench) -> Models {
    let local = kerf_llama::models::list(&wb.models)
        .into_iter()
        .filter(|(_, info)| info.is_ok())
        .map(|(p, _)| p.display().to_string())
        .collect();
    let providers = kerf_llm::providers::Registry::load(&wb.providers)
        .map(|r| r.providers.into_iter().map(|p| p.name).collect())
        .unwrap_or_default();
    let (devices, devices_error) = match kerf_llama::devices() {
        Ok(d) => (
            d.into_iter()
                .map(|d| DeviceInfo {
                    name: d.name,
                    description: d.description,
                    kind: d.kind,
                    memory_total: d.memory_total as u64,
                    memory_free: d.memory_free as u64,
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    Models {
        local,
        providers,
        devices,
        engine: kerf_llama::ENGINE,
        devices_error,
    }
}

/// Fetch the bundled default model into the workbench's models folder: its path.
pub fn fetch(wb: &Workbench, say: &mut dyn FnMut(&str)) -> crate::Result<std::path::PathBuf> {
    Ok(kerf_llama::models::fetch(&wb.models, say)?)
}
