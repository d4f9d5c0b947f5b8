#![no_main]
//! The GGUF header reader on arbitrary bytes (as `kerf models list` meets any `.gguf` in the
//! models folder): an answer or an error, never a panic, an abort or a runaway allocation.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The reader takes a path; a file in memory (/dev/shm where there is one) runs about three
    // times faster than one on disk.
    static PATH: std::sync::LazyLock<std::path::PathBuf> = std::sync::LazyLock::new(|| {
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
        dir.join(format!("kerf-fuzz-{}.gguf", std::process::id()))
    });
    // A valid magic and version most of the time, so the fuzzer spends its effort on the
    // key-value section rather than on the first eight bytes.
    let mut file = Vec::with_capacity(data.len() + 8);
    if data.first().is_some_and(|b| b % 4 != 0) {
        file.extend_from_slice(b"GGUF\x03\x00\x00\x00");
    }
    file.extend_from_slice(data);
    std::fs::write(&*PATH, &file).expect("temp file");
    if let Ok(info) = kerf_llama::gguf::inspect(&PATH) {
        let _ = kerf_llama::gguf::check_memory(&info);
    }
});
