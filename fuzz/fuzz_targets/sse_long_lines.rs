#![no_main]
//! The server-sent-events reader on streams of long lines and big pieces (what it keeps to name a
//! refused line once lost a line that came in one piece with far more after it): a byte 0xFF followed by a byte n stands for n KiB of `x`, so a few input bytes
//! make lines of hundreds of KiB. However the stream is split, the events and the error (its
//! line number and text included) are the same, and no piece is rescanned.
use libfuzzer_sys::fuzz_target;

fn expand(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = data.iter();
    while let Some(&b) = bytes.next() {
        match b {
            0xFF => {
                let n = bytes.next().copied().unwrap_or(1);
                out.resize(out.len() + usize::from(n) * 1024, b'x');
            }
            _ => out.push(b),
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, body)) = data.split_first() else {
        return;
    };
    let body = expand(body);
    let whole = kerf_llm::sse::decode(&[&body]);
    // Pieces from 1 byte to 64 KiB, so lines cross piece and window boundaries both ways.
    let step = 1usize << (step % 17);
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    let split = kerf_llm::sse::decode(&pieces);
    assert_eq!(whole.0, split.0, "events depend on the split (every {step} bytes)");
    if let (Err(a), Err(b)) = (&whole.1, &split.1) {
        if a.contains("not an SSE field") || b.contains("not an SSE field") {
            assert_eq!(a, b, "the refused line depends on the split (every {step} bytes)");
        }
    }
});
