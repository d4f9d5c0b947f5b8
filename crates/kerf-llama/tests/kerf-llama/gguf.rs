//! The GGUF header reader: what it reads, and the files it refuses before llama.cpp sees them.

use kerf_llama::gguf::{check_memory, inspect};

/// A small GGUF: metadata, and one F32 tensor of `elements` whose data is `data_bytes` long.
fn tiny_gguf(elements: u64, data_bytes: usize) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(4u64.to_le_bytes()); // metadata entries
    let s = |b: &mut Vec<u8>, t: &str| {
        b.extend((t.len() as u64).to_le_bytes());
        b.extend(t.as_bytes());
    };
    s(&mut b, "general.architecture");
    b.extend(8u32.to_le_bytes());
    s(&mut b, "llama");
    s(&mut b, "general.file_type");
    b.extend(4u32.to_le_bytes());
    b.extend(3u32.to_le_bytes());
    s(&mut b, "llama.context_length");
    b.extend(4u32.to_le_bytes());
    b.extend(8192u32.to_le_bytes());
    s(&mut b, "tokenizer.ggml.tokens");
    b.extend(9u32.to_le_bytes());
    b.extend(8u32.to_le_bytes());
    b.extend(2u64.to_le_bytes());
    s(&mut b, "a");
    s(&mut b, "bc");
    // Tensor info: name, dims, shape, type F32, offset 0.
    s(&mut b, "w");
    b.extend(1u32.to_le_bytes());
    b.extend(elements.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    while b.len() % 32 != 0 {
        b.push(0);
    }
    b.extend(vec![0u8; data_bytes]);
    b
}

#[test]
fn reads_architecture_quantisation_and_context() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.gguf");
    std::fs::write(&p, tiny_gguf(16, 64)).unwrap();
    let info = inspect(&p).unwrap();
    assert_eq!(info.architecture.as_deref(), Some("llama"));
    assert_eq!(info.quantisation.as_deref(), Some("Q4_1"));
    assert_eq!(info.context_length, Some(8192));
    assert_eq!(info.tensors, 1);
    assert!(info.chat_template.is_none());
}

#[test]
fn refuses_what_is_not_a_whole_gguf() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, "just some text, long enough to have a header").unwrap();
    let err = inspect(&text).unwrap_err();
    assert_eq!(err.code(), "model");
    assert!(err.to_string().contains("not a GGUF"), "{err}");
    assert!(err.to_string().contains("notes.gguf"), "{err}");

    // The tensor needs 64 bytes of data; the file stops after 10.
    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, tiny_gguf(16, 10)).unwrap();
    let err = inspect(&cut).unwrap_err();
    assert!(err.to_string().contains("truncated GGUF"), "{err}");

    // Cut inside the header.
    let head = dir.path().join("head.gguf");
    std::fs::write(&head, &tiny_gguf(16, 64)[..40]).unwrap();
    let err = inspect(&head).unwrap_err();
    assert!(err.to_string().contains("truncated GGUF"), "{err}");

    let missing = inspect(&dir.path().join("nope.gguf")).unwrap_err();
    assert!(
        missing.to_string().contains("no such model file"),
        "{missing}"
    );
}

/// A GGUF whose tensor data is `bytes` long, as a sparse file: the header is real, the rest holes.
pub fn sparse_gguf(path: &std::path::Path, bytes: u64) {
    let head = tiny_gguf(bytes / 4, 0);
    std::fs::write(path, &head).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.set_len(head.len() as u64 + bytes).unwrap();
}

#[test]
fn a_model_larger_than_memory_is_refused_before_loading() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("huge.gguf");
    sparse_gguf(&p, 1 << 40); // 1 TiB of weights
    let info = inspect(&p).unwrap();
    assert!(info.size_bytes > 1 << 40);
    let err = check_memory(&info).unwrap_err();
    assert_eq!(err.code(), "model");
    let msg = err.to_string();
    assert!(
        msg.contains("huge.gguf") && msg.contains("too large for this machine"),
        "{msg}"
    );
    assert!(msg.contains("MiB of memory is available"), "{msg}");
}

/// A GGUF header with one metadata entry, written by `entry` (after its key), and no tensors.
fn one_entry_gguf(key: &str, entry: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend(b"GGUF");
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes()); // tensors
    b.extend(1u64.to_le_bytes()); // metadata entries
    b.extend((key.len() as u64).to_le_bytes());
    b.extend(key.as_bytes());
    entry(&mut b);
    b
}

/// Security review, finding 9: arrays nested in arrays overflowed the header reader's stack and
/// aborted the process (`kerf models list`, the window's model list, any `--model`).
#[test]
fn deeply_nested_arrays_are_a_damaged_file_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nested.gguf");
    let file = one_entry_gguf("x.nested", |b| {
        b.extend(9u32.to_le_bytes()); // an array …
        for _ in 0..200_000 {
            b.extend(9u32.to_le_bytes()); // … of arrays …
            b.extend(1u64.to_le_bytes()); // … of one element each
        }
    });
    std::fs::write(&p, file).unwrap();
    let err = inspect(&p).unwrap_err().to_string();
    assert!(
        err.contains("nested.gguf") && err.contains("arrays nested more than"),
        "{err}"
    );
}

/// Security review, finding 9: the size sums overflowed on crafted integers (an alignment or a
/// tensor shape near 2^64).
#[test]
fn impossible_sizes_are_a_damaged_file_not_an_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("align.gguf");
    let file = one_entry_gguf("general.alignment", |b| {
        b.extend(10u32.to_le_bytes()); // u64
        b.extend(u64::MAX.to_le_bytes());
    });
    std::fs::write(&p, file).unwrap();
    let err = inspect(&p).unwrap_err().to_string();
    assert!(
        err.contains("align.gguf") && err.contains("truncated GGUF"),
        "{err}"
    );

    let p = dir.path().join("shape.gguf");
    std::fs::write(&p, tiny_gguf(u64::MAX, 64)).unwrap();
    let err = inspect(&p).unwrap_err().to_string();
    assert!(
        err.contains("shape.gguf") && err.contains("truncated GGUF"),
        "{err}"
    );
}
