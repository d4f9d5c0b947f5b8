#![no_main]
//! The server-sent-events reader on streams of long lines and big pieces (what it keeps to name a
//! refused line once lost a line that came in one piece with far more after it): a byte 0xFF followed by a byte n stands for n KiB of `x`, so a few input bytes
//! make lines of many KiB (16 KiB of stream at most). However the stream is split, the events and the error (its
//! line number and text included) are the same, and no piece is rescanned.
use libfuzzer_sys::fuzz_target;

/// At most this much stream per input: lines 128 times the reader's 128-byte heads, and small
/// enough for millions of executions (unbounded, one input could expand to 512 MiB and the
/// target ran 300 inputs a second).
const MOST: usize = 16 << 10;

fn expand(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = data.iter();
    while let Some(&b) = bytes.next() {
        match b {
            0xFF => {
                let n = bytes.next().copied().unwrap_or(1);
                out.resize((out.len() + usize::from(n) * 1024).min(MOST), b'x');
            }
            _ => out.push(b),
        }
        if out.len() >= MOST {
            out.truncate(MOST);
            break;
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
    // Pieces from 1 byte to 64 KiB, so lines cross piece boundaries both ways; at most 4,096
    // pieces (a long stream is cut in larger ones).
    let step = (1usize << (step % 17)).max(body.len().div_ceil(4096));
    let pieces: Vec<&[u8]> = body.chunks(step).collect();
    let split = kerf_llm::sse::decode(&pieces);
    assert_eq!(whole.0, split.0, "events depend on the split (every {step} bytes)");
    if let (Err(a), Err(b)) = (&whole.1, &split.1) {
        if a.contains("not an SSE field") || b.contains("not an SSE field") {
            assert_eq!(a, b, "the refused line depends on the split (every {step} bytes)");
        }
    }
});
