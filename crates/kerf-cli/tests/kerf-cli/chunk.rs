//! `kerf chunk`: its JSON Lines, its table, and what it refuses (each naming why, with its exit
//! status). That the chunks are TrustGraph's own is `tests/parity/chunker_parity.py`'s to show.

use std::process::Output;

use super::{kerf, kerf_stdin, stderr};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn doc(text: &[u8]) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("doc.txt");
    std::fs::write(&path, text).unwrap();
    (dir, path.to_str().unwrap().to_string())
}

#[test]
fn json_lines_give_each_chunk_its_number_text_and_place() {
    let text = "Kerf cuts documents.\n\nGrüße — e\u{301} and 🎉 count as Python counts them.\n\nA third paragraph.";
    let (_dir, path) = doc(text.as_bytes());
    let o = kerf(&[
        "chunk",
        &path,
        "--chunk-size",
        "40",
        "--chunk-overlap",
        "5",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let chars: Vec<char> = text.chars().collect();
    let chunks: Vec<serde_json::Value> = stdout(&o)
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(chunks.len(), 4, "{chunks:?}");
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c["index"], i + 1);
        let (s, e) = (
            c["start"].as_u64().unwrap() as usize,
            c["end"].as_u64().unwrap() as usize,
        );
        assert_eq!(
            chars[s..e].iter().collect::<String>(),
            c["text"].as_str().unwrap()
        );
    }
    assert_eq!(chunks[3]["text"], "A third paragraph.");

    // A token window has its place unless it splits a character (then its text holds U+FFFD
    // the document does not); the presets set what is not given.
    let token = [
        "chunk",
        &path,
        "--chunker",
        "token",
        "--chunk-size",
        "4",
        "--chunk-overlap",
        "1",
    ];
    let o = kerf(&[&token[..], &["--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let windows: Vec<serde_json::Value> = stdout(&o)
        .split('\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(windows[0]["index"], 1);
    let mut unplaced = 0;
    for w in &windows {
        let text = w["text"].as_str().unwrap();
        match (w["start"].as_u64(), w["end"].as_u64()) {
            (Some(s), Some(e)) => assert_eq!(
                chars[s as usize..e as usize].iter().collect::<String>(),
                text
            ),
            _ => {
                assert!(text.contains('\u{fffd}'), "{w}");
                unplaced += 1;
            }
        }
    }
    // The emoji's four bytes are two tokens in cl100k_base: some window splits it.
    assert!(unplaced > 0 && unplaced < windows.len(), "{windows:?}");
    // The table gives such a window the place of the characters it holds whole, marked, and
    // says what the mark means.
    let o = kerf(&token);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let rows: Vec<&str> = table.lines().filter(|l| l.contains('\u{fffd}')).collect();
    assert_eq!(rows.len(), unplaced, "{table}");
    assert!(rows.iter().all(|r| r.contains('≈')), "{table}");
    assert!(
        table.contains("≈: the window splits a character at an edge"),
        "{table}"
    );

    let o = kerf(&["chunk", &path, "--preset", "flow"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("1 chunk(s), recursive chunker, size 2000 characters, overlap 50"),
        "{}",
        stdout(&o)
    );
}

/// `-` reads the document from standard input (text piped from `pdftotext`, say): the same
/// chunks as from the file, and bad bytes named as coming from there.
#[test]
fn standard_input_is_a_document_too() {
    let text = "Piped in.\n\nGrüße — e\u{301} and 🎉, a second paragraph.\n\nA third.";
    let (_dir, path) = doc(text.as_bytes());
    let args = |file: &str| {
        [
            "chunk",
            file,
            "--chunk-size",
            "30",
            "--chunk-overlap",
            "5",
            "--json",
        ]
        .map(str::to_string)
    };
    let from_file = kerf(&args(&path).each_ref().map(String::as_str));
    let piped = kerf_stdin(
        &args("-").each_ref().map(String::as_str),
        Some(text.as_bytes()),
    );
    assert!(piped.status.success(), "{}", stderr(&piped));
    assert_eq!(stdout(&piped), stdout(&from_file));
    assert!(stdout(&piped).lines().count() > 2, "{}", stdout(&piped));
    let table = kerf_stdin(&["chunk", "-"], Some(text.as_bytes()));
    assert!(
        stdout(&table).starts_with("<stdin>: 1 chunk(s), recursive chunker"),
        "{}",
        stdout(&table)
    );
    let o = kerf_stdin(&["chunk", "-"], Some(b"caf\xe9 au lait"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("<stdin>") && stderr(&o).contains("first bad byte at offset 3"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_settings_and_bad_files_are_refused_naming_why() {
    let (_dir, path) = doc(b"some text");
    let o = kerf(&["chunk", &path, "--chunk-size", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("error[usage]: --chunk-size must be at least 1"),
        "{}",
        stderr(&o)
    );
    let o = kerf(&[
        "chunk",
        &path,
        "--chunk-size",
        "100",
        "--chunk-overlap",
        "100",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--chunk-overlap 100 must be smaller than --chunk-size 100"),
        "{}",
        stderr(&o)
    );
    let (_bad, latin1) = doc(b"caf\xe9 au lait");
    let o = kerf(&["chunk", &latin1]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("not valid UTF-8 (first bad byte at offset 3)"),
        "{}",
        stderr(&o)
    );
    // A missing file: named, and the system's reason said once.
    let o = kerf(&["chunk", "/nonexistent/doc.txt"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).trim(),
        "kerf: error[io]: /nonexistent/doc.txt: No such file or directory (os error 2)"
    );
    let (_special, special) = doc(b"text <|endoftext|> more");
    let o = kerf(&["chunk", &special, "--chunker", "token"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`<|endoftext|>` at character 5"),
        "{}",
        stderr(&o)
    );
}

/// Chunker settings go to TrustGraph as its flow parameters (strings) with the processor to
/// deploy, and come back through `kerf import` and `kerf chunk --settings`; what cannot be
/// exported or read is refused, naming the place.
#[test]
fn chunker_settings_export_as_flow_parameters_and_read_back() {
    let text = "One paragraph here.\n\nAnother one, a little longer than the first.\n\nA third.";
    let (dir, path) = doc(text.as_bytes());
    let file = dir.path().join("flow.json");
    let file = file.to_str().unwrap();
    let o = kerf(&[
        "export",
        "--to",
        "trustgraph-chunking",
        "--chunker",
        "token",
        "--chunk-size",
        "8",
        "--chunk-overlap",
        "2",
        "--out",
        file,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("approximate"), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(
        v["parameters"],
        serde_json::json!({"chunk-size": "8", "chunk-overlap": "2"})
    );
    assert_eq!(v["processor"], "chunker-token");

    let o = kerf(&["import", file, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let back: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        back["chunking"],
        serde_json::json!({"chunker": "token", "size": 8, "overlap": 2})
    );
    let by_file = kerf(&["chunk", &path, "--settings", file, "--json"]);
    let by_flags = kerf(&[
        "chunk",
        &path,
        "--chunker",
        "token",
        "--chunk-size",
        "8",
        "--chunk-overlap",
        "2",
        "--json",
    ]);
    assert!(by_file.status.success(), "{}", stderr(&by_file));
    assert_eq!(stdout(&by_file), stdout(&by_flags));

    // Refused: prompts with the chunker target, no size, a bad parameter (named by pointer).
    let o = kerf(&[
        "export",
        "prompts/agent-kg-extract.json",
        "--to",
        "trustgraph-chunking",
        "--chunk-size",
        "10",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("not prompts"), "{}", stderr(&o));
    let o = kerf(&["export", "--to", "trustgraph-chunking"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("give --chunk-size"), "{}", stderr(&o));
    let o = kerf(&[
        "export",
        "--to",
        "openai",
        "--chunk-size",
        "10",
        "prompts/agent-kg-extract.json",
    ]);
    assert_eq!(o.status.code(), Some(2));
    std::fs::write(file, r#"{"parameters": {"chunk-size": "2k"}}"#).unwrap();
    let o = kerf(&["chunk", &path, "--settings", file]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("/parameters/chunk-size") && stderr(&o).contains("`2k`"),
        "{}",
        stderr(&o)
    );
}
