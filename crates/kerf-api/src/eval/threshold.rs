//! Minimums an eval's lines must reach (`kerf eval --fail-under f1=0.8`): CI's verdict on an
//! eval, the same wherever it is read.

use std::str::FromStr;

use super::SummaryLine;

/// A figure every prompt × budget × constraint line must reach.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    pub metric: Metric,
    pub min: f64,
}

/// A figure of a summary line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    F1,
    Precision,
    Recall,
    MacroF1,
}

impl Metric {
    pub const ALL: [Metric; 4] = [
        Metric::F1,
        Metric::Precision,
        Metric::Recall,
        Metric::MacroF1,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::F1 => "f1",
            Metric::Precision => "precision",
            Metric::Recall => "recall",
            Metric::MacroF1 => "macro_f1",
        }
    }

    /// `line`'s figure (`None`: nothing measured to compute it from).
    pub fn of(self, line: &SummaryLine) -> Option<f64> {
        match self {
            Metric::F1 => line.micro.f1,
            Metric::Precision => line.micro.precision,
            Metric::Recall => line.micro.recall,
            Metric::MacroF1 => line.macro_f1,
        }
    }
}

impl FromStr for Threshold {
    type Err = String;

    /// `METRIC=VALUE`, e.g. `f1=0.8`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}`: write METRIC=VALUE, e.g. f1=0.8"))?;
        let metric = Metric::ALL
            .into_iter()
            .find(|m| m.name() == name.trim())
            .ok_or_else(|| format!("`{name}`: the metrics are f1, precision, recall, macro_f1"))?;
        let min: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| (0.0..=1.0).contains(v))
            .ok_or_else(|| format!("`{value}`: a threshold is a number from 0 to 1"))?;
        Ok(Threshold { metric, min })
    }
}

impl Threshold {
    /// How `line` misses this minimum, as people read it (`f1 0.500 < 0.8`); `None` when it
    /// reaches it. A figure that could not be computed misses.
    pub fn missed(&self, line: &SummaryLine) -> Option<String> {
        let got = self.metric.of(line);
        got.is_none_or(|v| v < self.min).then(|| {
            format!(
                "{} {} < {}",
                self.metric.name(),
                got.map_or("null".to_string(), |v| format!("{v:.3}")),
                self.min
            )
        })
    }
}
