//! The webview's rendering mode. WebKitGTK composites the page with OpenGL; on a machine with no
//! GPU it can use (no DRM render node: a VM, a server, Xvfb) that OpenGL is Mesa's llvmpipe on
//! the CPU, and every frame that changes costs the whole window's compositing. Measured by
//! bench/desktop/run on the development machine (2 cores, Xvfb) while 1,000 objects stream in:
//! frame gaps of 209 ms (median; 166 frames over 100 ms) composited, 26 ms (none over 100 ms)
//! with acceleration off, and 100 MiB less memory at idle. So without
//! a render node Kerf turns hardware acceleration off; `KERF_WEBVIEW_ACCELERATION=on|off`
//! overrides the guess either way.

/// Whether the webview should composite with OpenGL, and why (for the log).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn accelerate() -> (bool, &'static str) {
    match std::env::var("KERF_WEBVIEW_ACCELERATION").as_deref() {
        Ok("on") => return (true, "KERF_WEBVIEW_ACCELERATION=on"),
        Ok("off") => return (false, "KERF_WEBVIEW_ACCELERATION=off"),
        _ => {}
    }
    let render_node = std::fs::read_dir("/dev/dri").is_ok_and(|d| {
        d.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("renderD"))
    });
    if render_node {
        (true, "a GPU render node is present")
    } else {
        (
            false,
            "no GPU render node (/dev/dri/renderD*): OpenGL would run on the CPU",
        )
    }
}

/// Apply the rendering mode to the main window's webview.
pub fn tune<R: tauri::Runtime>(app: &tauri::App<R>) {
    #[cfg(target_os = "linux")]
    {
        use tauri::Manager;
        let (on, why) = accelerate();
        tracing::info!(accelerated = on, why, "webview rendering");
        if on {
            return;
        }
        let Some(window) = app.get_webview_window("main") else {
            return;
        };
        let applied = window.with_webview(|w| {
            use webkit2gtk::{HardwareAccelerationPolicy, SettingsExt, WebViewExt};
            if let Some(settings) = WebViewExt::settings(&w.inner()) {
                settings.set_hardware_acceleration_policy(HardwareAccelerationPolicy::Never);
            }
        });
        if let Err(e) = applied {
            tracing::warn!("could not set the webview's rendering mode: {e}");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = app;
}
