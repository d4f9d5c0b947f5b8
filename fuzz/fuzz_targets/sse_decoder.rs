#![no_main]
//! The server-sent-events decoder on arbitrary bytes fed in arbitrary pieces: no panic, and the
//! events do not depend on where the stream was split.
use libfuzzer_sys::fuzz_target;

fn decode(pieces: &[&[u8]]) -> (Vec<kerf_llm::sse::SseEvent>, Result<(), String>) {
    kerf_llm::sse::decode(pieces)
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let whole = decode(&[body]);
    let step = usize::from(step % 17) + 1;
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    let split = decode(&pieces);
    // Errors may be found at different points, but a clean stream decodes identically.
    if whole.1.is_ok() && split.1.is_ok() {
        assert_eq!(whole.0, split.0, "events depend on the split (every {step} bytes)");
    }
});
