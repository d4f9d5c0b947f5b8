//! Logs to a rolling file in the app's log directory (a new file each day, the last 7 kept), and
//! to standard error. `RUST_LOG` filters as usual (default: `info`).

use std::path::Path;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub fn init(dir: &Path) {
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = std::fs::create_dir_all(dir);
    let file = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("kerf")
        .filename_suffix("log")
        .max_log_files(7)
        .build(dir);
    // Colour only for a person at a terminal: a pipe or a CI log gets plain text.
    let colour = {
        use std::io::IsTerminal;
        std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
    };
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    // llama.cpp's lines are kept for run reports (the layers it really offloaded, the backend
    // modules it loaded), whatever the filter shows.
    let registry = tracing_subscriber::registry()
        .with(kerf_llama::logs::Capture)
        .with(stderr.with_filter(filter()));
    let result = match file {
        Ok(appender) => registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_ansi(false)
                    .with_writer(appender)
                    .with_filter(filter()),
            )
            .try_init(),
        Err(e) => {
            eprintln!(
                "kerf-desktop: no log file in {} ({e}); logging to stderr only",
                dir.display()
            );
            registry.try_init()
        }
    };
    let _ = result;
}
