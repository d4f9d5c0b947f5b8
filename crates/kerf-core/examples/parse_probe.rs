//! Measurement probe for the parsers (issue 36, items 11 and 12); not part of any build step.
//!
//! - `parse_probe gen-array PATH MB`: a one-line JSON array of extraction objects, about MB
//!   megabytes.
//! - `parse_probe gen-empty PATH LINES`: LINES lines of `{}`.
//! - `parse_probe parse TYPE PATH [salvage]`: parse the file (`json` or `jsonl`) and print the
//!   counts and the process's peak resident memory (run it under `/usr/bin/time -v` too).
//! - `parse_probe open KB CHUNK [jsonl|delimited]`: one open KB-kilobyte object (or delimited
//!   record) fed to the streaming parser in CHUNK-byte pieces; prints the time.

use std::io::Write;
use std::time::Instant;

use kerf_core::{Parser, ResponseType, StreamParser};
use serde_json::Map;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    match arg(0) {
        "gen-array" => {
            let target: usize = arg(2).parse::<usize>().expect("MB") * 1_000_000;
            let mut out = std::io::BufWriter::new(std::fs::File::create(arg(1)).expect("create"));
            let mut n = 0usize;
            let mut written = 1usize;
            out.write_all(b"[").expect("write");
            while written < target {
                let o = format!(
                    "{}{{\"type\":\"entity\",\"name\":\"entity {n}\",\"description\":\"Entity {n} of the text\"}}",
                    if n > 0 { "," } else { "" }
                );
                out.write_all(o.as_bytes()).expect("write");
                written += o.len();
                n += 1;
            }
            out.write_all(b"]").expect("write");
            eprintln!("{n} objects, {} bytes", written + 1);
        }
        "gen-empty" => {
            let lines: usize = arg(2).parse().expect("LINES");
            let mut out = std::io::BufWriter::new(std::fs::File::create(arg(1)).expect("create"));
            for _ in 0..lines {
                out.write_all(b"{}\n").expect("write");
            }
        }
        "parse" => {
            let t = match arg(1) {
                "json" => ResponseType::Json,
                "jsonl" => ResponseType::Jsonl,
                other => panic!("type {other}"),
            };
            let parser = Parser::new(t).with_salvage(arg(3) == "salvage");
            let text = std::fs::read_to_string(arg(2)).expect("read");
            let after_read = peak_rss_kib();
            let start = Instant::now();
            let report = parser.parse(&text, &Map::new());
            let took = start.elapsed();
            let peak = peak_rss_kib();
            println!(
                "{} bytes, {} objects, {} dropped, truncated {}; {:.2?}; peak RSS {} MiB after reading, {} MiB after parsing ({:.1}x the reply)",
                text.len(),
                report.objects.len(),
                report.dropped.len(),
                report.truncated,
                took,
                after_read / 1024,
                peak / 1024,
                (peak * 1024) as f64 / text.len() as f64
            );
            std::mem::forget(report);
        }
        "open" => {
            let kb: usize = arg(1).parse().expect("KB");
            let chunk: usize = arg(2).parse().expect("CHUNK");
            let (parser, text) = if arg(3) == "delimited" {
                let mut t = String::from("entity<|#|>Ada<|#|>person<|#|>");
                while t.len() < kb * 1000 {
                    t.push_str("words of a long description ");
                }
                t.push_str("\n<|COMPLETE|>");
                (Parser::new(ResponseType::Delimited), t)
            } else {
                let mut t = String::from("{");
                let mut i = 0;
                while t.len() < kb * 1000 {
                    t.push_str(&format!("\"key {i}\": \"value {{{i}}} \\\"q\\\"\", "));
                    i += 1;
                }
                t.push_str("\"last\": 0}\n");
                (Parser::new(ResponseType::Jsonl), t)
            };
            let vars = Map::new();
            let start = Instant::now();
            let mut s = StreamParser::new(&parser, vars.clone());
            let mut at = 0;
            while at < text.len() {
                let next = (at + chunk).min(text.len());
                s.feed(&text[at..next]);
                at = next;
            }
            let report = s.finish();
            let took = start.elapsed();
            assert_eq!(report, parser.parse(&text, &vars));
            println!(
                "{} bytes in {chunk}-byte pieces: {} object(s), {took:.2?}",
                text.len(),
                report.objects.len()
            );
        }
        "sizes" => println!(
            "Value {} bytes, Map {} bytes",
            std::mem::size_of::<serde_json::Value>(),
            std::mem::size_of::<Map<String, serde_json::Value>>()
        ),
        _ => eprintln!("usage: see the module docs"),
    }
}
