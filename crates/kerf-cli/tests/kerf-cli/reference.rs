//! The book's CLI reference is generated from the clap definitions (`kerf help-markdown`), so it
//! cannot drift from the commands: the committed page must be what the binary prints.

use super::{kerf, repo};

/// After changing a command's arguments or help: `KERF_BLESS=1 cargo test -p kerf-cli --test
/// kerf-cli reference` rewrites `docs/src/reference/cli.md` (never run in CI), then commit it.
#[test]
fn the_books_cli_reference_is_what_the_clap_definitions_generate() {
    let out = kerf(&["help-markdown"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = String::from_utf8(out.stdout).unwrap();
    let path = repo().join("docs/src/reference/cli.md");
    if std::env::var_os("KERF_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let first = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()));
        panic!(
            "docs/src/reference/cli.md drifted from the clap definitions (first difference at line {}: \
             committed {:?}, generated {:?}); run `KERF_BLESS=1 cargo test -p kerf-cli --test kerf-cli reference` and commit",
            first + 1,
            committed.lines().nth(first),
            generated.lines().nth(first)
        );
    }
}

/// The generator is hidden: `kerf --help` lists what users run, not how the book is made.
#[test]
fn help_markdown_is_not_listed_in_kerfs_help() {
    let out = kerf(&["--help"]);
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("history"), "{help}");
    assert!(!help.contains("help-markdown"), "{help}");
}
