// Kerf's own commands are declared here so tauri-build generates an `allow-…` permission for
// each: the window may call only what `capabilities/main.json` lists.
fn main() {
    let manifest = tauri_build::AppManifest::new().commands(kerf_desktop_commands());
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(manifest))
        .expect("tauri-build failed (see the message above)");
}

/// Every `#[tauri::command]` in src/commands (a test checks the list against the handler).
fn kerf_desktop_commands() -> &'static [&'static str] {
    &include!("src/commands/names.in")
}
