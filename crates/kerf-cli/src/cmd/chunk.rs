//! `kerf chunk`: cut a document as TrustGraph's chunkers cut it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use clap::ValueEnum;
use kerf_core::chunk::{ChunkRef, ChunkSettings, Chunker};

use crate::Outcome;
use crate::output::shorten;

#[derive(Clone, Copy, ValueEnum)]
pub enum ChunkerArg {
    /// TrustGraph's recursive splitter: sizes in characters.
    Recursive,
    /// TrustGraph's token chunker: sizes in cl100k_base tokens.
    Token,
}

impl From<ChunkerArg> for Chunker {
    fn from(c: ChunkerArg) -> Self {
        match c {
            ChunkerArg::Recursive => Chunker::Recursive,
            ChunkerArg::Token => Chunker::Token,
        }
    }
}

/// Where the size and overlap come from when not given.
#[derive(Clone, Copy, ValueEnum)]
pub enum PresetArg {
    /// The chunker processor's own defaults: recursive 2000/100, token 250/15.
    Processor,
    /// A deployed TrustGraph flow's: 2000/50 (its flow parameters override the processor's).
    Flow,
}

/// Cut a document into chunks exactly as TrustGraph's chunkers do (trustgraph-flow 2.11.1).
#[derive(clap::Args)]
#[command(after_help = "\
Examples:
  kerf chunk report.txt --chunk-size 1000 --chunk-overlap 50
  kerf chunk report.txt --chunker token --preset flow --json
  pdftotext report.pdf - | kerf chunk - --json

With --json, prints JSON Lines, one chunk a line: {\"index\", \"text\"} (index from 1), and
\"start\" and \"end\": character offsets into the document, end exclusive (the text is exactly the
document's characters between them) — every recursive chunk's, and a token window's unless it
splits a character (its text then holds U+FFFD, which the document does not).
Exits 2 on a size of 0 or an overlap not smaller than the size, 1 on a file that is not UTF-8.")]
pub struct Args {
    /// The document (UTF-8 text; `-` for standard input).
    pub file: PathBuf,
    /// Which of TrustGraph's chunkers.
    #[arg(long, value_enum, default_value = "recursive")]
    pub chunker: ChunkerArg,
    /// The most a chunk holds: characters (recursive) or tokens (token). Default: the preset's.
    #[arg(long, value_name = "N")]
    pub chunk_size: Option<usize>,
    /// How much of a chunk's end the next one repeats, in the same unit. Default: the preset's.
    #[arg(long, value_name = "M")]
    pub chunk_overlap: Option<usize>,
    /// The size and overlap when not given.
    #[arg(long, value_enum, default_value = "processor")]
    pub preset: PresetArg,
    /// Cut with the settings a TrustGraph flow takes, from a file `kerf export --to
    /// trustgraph-chunking` wrote (or a flow's `parameters`), instead of the flags.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["chunk_size", "chunk_overlap", "preset"])]
    pub settings: Option<PathBuf>,
    /// Print JSON Lines, one chunk a line.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<Outcome> {
    let settings = match &args.settings {
        Some(path) => kerf_api::export::read_chunking(path)?,
        None => {
            let chunker = Chunker::from(args.chunker);
            let preset = match args.preset {
                PresetArg::Processor => chunker.processor_defaults(),
                PresetArg::Flow => chunker.flow_defaults(),
            };
            ChunkSettings {
                chunker,
                size: args.chunk_size.unwrap_or(preset.size),
                overlap: args.chunk_overlap.unwrap_or(preset.overlap),
            }
        }
    };
    let chunker = settings.chunker;
    settings.check()?;
    let doc = crate::output::read_input(&args.file)?;
    let chunks = kerf_core::chunk::chunk_refs(&doc, &settings)?;
    if args.json {
        crate::output::write_streamed(|out| {
            let mut line = Vec::new();
            for chunk in &chunks {
                json_line(chunk, &mut line);
                out.write_all(&line)?;
            }
            Ok(())
        });
        return Ok(Outcome::Ok);
    }
    crate::outln!(
        "{}: {} chunk(s), {} chunker, size {} {}, overlap {}",
        crate::output::place(&args.file),
        chunks.len(),
        chunker,
        settings.size,
        chunker.unit(),
        settings.overlap
    );
    let mut split = false;
    for c in &chunks {
        let place = match (c.start, c.end, c.held()) {
            (Some(s), Some(e), _) => format!("{s:>8}–{e:<8}"),
            (_, _, Some(held)) => {
                split = true;
                format!("{:>8}–{:<8}", format!("≈{}", held.start), held.end)
            }
            _ => " ".repeat(17),
        };
        let preview = c.text.replace('\n', "⏎");
        crate::outln!(
            "  {:>4}  {place} {:>6} chars  {}",
            c.index,
            c.text.chars().count(),
            shorten(preview, 70)
        );
    }
    if split {
        crate::outln!(
            "  ≈: the window splits a character at an edge (its text holds U+FFFD there, as TrustGraph's does); the place is that of the characters it holds whole"
        );
    }
    Ok(Outcome::Ok)
}

/// One chunk as the JSON line `serde_json::to_writer` writes of it, byte for byte, its text
/// escaped by `json-escape-simd` (sonic-rs's SIMD escaper): on a 10 MB document serde_json's
/// byte-at-a-time escaping was a fifth of the whole command's time.
fn json_line(chunk: &ChunkRef, line: &mut Vec<u8>) {
    line.clear();
    // Writing to a Vec cannot fail.
    let _ = write!(line, "{{\"index\":{},\"text\":", chunk.index);
    json_escape_simd::escape_into(&*chunk.text, line);
    if let Some(start) = chunk.start {
        let _ = write!(line, ",\"start\":{start}");
    }
    if let Some(end) = chunk.end {
        let _ = write!(line, ",\"end\":{end}");
    }
    line.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    /// The hand-made line is serde_json's, for every character JSON escapes and some it does not.
    #[test]
    fn a_json_line_is_serde_jsons() -> serde_json::Result<()> {
        let every_ascii: String = (0u8..=0x7f).map(char::from).collect();
        let texts = [
            String::new(),
            every_ascii.clone(),
            every_ascii.repeat(7),
            "\"quoted\" \\ back\\slash\r\n\t\u{8}\u{c}\u{1f}\u{7f}".to_string(),
            "line\u{2028}para\u{2029} é 漢字 🦀 e\u{301}".repeat(40),
            "x".repeat(4097) + "\n",
        ];
        let mut line = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            for (start, end) in [
                (Some(i * 3), Some(i * 3 + text.chars().count())),
                (None, None),
            ] {
                let chunk = ChunkRef {
                    index: i + 1,
                    text: Cow::Borrowed(text),
                    start,
                    end,
                    anchor: None,
                };
                json_line(&chunk, &mut line);
                let mut want = serde_json::to_vec(&chunk)?;
                want.push(b'\n');
                assert_eq!(
                    String::from_utf8_lossy(&line),
                    String::from_utf8_lossy(&want),
                    "text {i}"
                );
            }
        }
        Ok(())
    }
}
