// A `dynamic-backends` build links llama.cpp as shared libraries (libllama.so, libggml*.so):
// `kerf` finds them in ../lib/kerf (the packages' layout: /usr/bin/kerf, /usr/lib/kerf/) or beside
// itself. Run from the target directory, it needs llama-cpp-sys-2's build folder on the library
// path: `cargo run` and `cargo test` put it there, scripts/bundle sets LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_DYNAMIC_BACKENDS").is_some() {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN/../lib/kerf:$ORIGIN");
    }
}
