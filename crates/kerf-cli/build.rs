// A `dynamic-backends` build links llama.cpp as shared libraries (libllama.so, libggml*.so):
// `kerf` finds them beside itself (the build's target directory, where llama-cpp-sys-2 puts
// them) or in ../lib/kerf (the packages' layout: /usr/bin/kerf, /usr/lib/kerf/).
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_DYNAMIC_BACKENDS").is_some() {
        println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN/../lib/kerf:$ORIGIN");
    }
}
