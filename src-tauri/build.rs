// Kerf's own commands come from their one declaration (src/commands/surface.in): tauri-build
// generates an `allow-…` permission for each, and the window's capability file lists exactly
// those, so the window may call Kerf's commands and nothing else.

/// The names in the declaration (the crate's own `commands!` reads the arguments too).
macro_rules! commands {
    ($($(#[doc = $doc:literal])* $name:ident $args:tt -> $ret:ty;)*) => {
        &[$(stringify!($name)),*]
    };
}

const COMMANDS: &[&str] = include!("src/commands/surface.in");

/// The main window's capability: core events, the title and the theme, then every Kerf command.
fn capability() -> String {
    let mut permissions = vec![
        "core:event:default".to_string(),
        "core:window:allow-set-title".to_string(),
        // The theme menu sets the window's light or dark scheme.
        "core:window:allow-set-theme".to_string(),
    ];
    permissions.extend(
        COMMANDS
            .iter()
            .map(|c| format!("allow-{}", c.replace('_', "-"))),
    );
    let list = permissions
        .iter()
        .map(|p| format!("    \"{p}\""))
        .collect::<Vec<_>>()
        .join(",\n");
    format!(
        r#"{{
  "$schema": "../gen/schemas/desktop-schema.json",
  "identifier": "main",
  "description": "The main window: Kerf's own commands only (no shell, no fs, no http, no direct dialogs: the open/save dialogs are Kerf's commands, which remember what the user picked). Written by build.rs from src/commands/surface.in; do not edit.",
  "windows": [
    "main"
  ],
  "permissions": [
{list}
  ]
}}
"#
    )
}

fn main() {
    println!("cargo:rerun-if-changed=src/commands/surface.in");
    // Written only when it changes, so the build does not see a new file each time.
    let path = std::path::Path::new("capabilities/main.json");
    let text = capability();
    if std::fs::read_to_string(path).ok().as_deref() != Some(text.as_str()) {
        std::fs::write(path, text).expect("cannot write capabilities/main.json");
    }
    // A `dynamic-backends` build (the packages') links llama.cpp as shared libraries: found in
    // ../lib/kerf (/usr/lib/kerf when installed) or beside the program (see kerf-cli's build.rs).
    if std::env::var_os("CARGO_FEATURE_DYNAMIC_BACKENDS").is_some() {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN/../lib/kerf:$ORIGIN");
    }
    let manifest = tauri_build::AppManifest::new().commands(COMMANDS);
    tauri_build::try_build(tauri_build::Attributes::new().app_manifest(manifest))
        .expect("tauri-build failed (see the message above)");
}
