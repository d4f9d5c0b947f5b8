//! What a front end receives of an eval: its progress as it goes, and its report — the very
//! types `kerf eval --json` prints (snake_case: the CLI's `--json` is an interface kept
//! exactly, so the window reads the same names), exported to TypeScript.

pub use super::Progress;
pub use super::analysis::{Advice, Comparison, DropBar, Drops, RowDiff, Side};
pub use super::lines::{CellLine, FindRate, RepeatStats, SummaryLine};
pub use super::report::Report;
