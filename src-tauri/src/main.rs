// No console window on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

/// mimalloc, as the CLI: scoring a long document allocates and frees millions of small values.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Before the window: a template's preview renders in a worker process (this executable,
    // started again) whose memory is limited, so no template can abort the app.
    kerf_core::render_worker::set_up(kerf_core::template::ENGINE);
    kerf_desktop::run();
}
