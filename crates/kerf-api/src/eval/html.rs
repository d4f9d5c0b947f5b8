//! An eval as one self-contained HTML page (`kerf eval report --html`, and the window's "Save
//! the HTML report"): the summary, F1 and recall
//! against the budget (the report's charts as SVG, inline), budget advice, repeats, comparisons,
//! the drop-reason histogram with its rows, and every row's expected and extracted records side
//! by side, marked matched / partial / missed / spurious. A minijinja template, auto-escaped.

use kerf_core::eval::score::without_aliases;
use serde_json::{Value, json};

use super::{CellLine, Eval, Report};
use crate::error::{ApiError, Code, Result};

const TEMPLATE: &str = include_str!("report.html");

/// `report` (of `eval`) as one HTML page, nothing fetched and no script.
pub fn html(eval: &Eval, report: &Report) -> Result<String> {
    let repeated = report.summary.iter().any(|l| l.repeats.is_some());
    let charts = report
        .budget_charts()
        .iter()
        .map(|c| crate::charts::svg(c, 760, 380))
        .collect::<Result<Vec<_>>>()?;
    let rows: Vec<Value> = eval
        .rows
        .iter()
        .map(|row| {
            let cells: Vec<Value> = report
                .cells
                .iter()
                .filter(|c| c.row == row.id && c.repeat == 0)
                .map(|c| {
                    let expected = eval
                        .subjects
                        .iter()
                        .find(|s| s.prompt.id() == c.prompt)
                        .and_then(|s| row.expected_for(&s.prompt))
                        .map(|(e, _)| e.to_vec())
                        .unwrap_or_default();
                    side_by_side(c, &expected)
                })
                .collect();
            json!({"id": row.id, "cells": cells})
        })
        .collect();
    let drops_max = report
        .drops
        .iter()
        .flat_map(|d| d.bars.iter().map(|b| b.objects))
        .max()
        .unwrap_or(1)
        .max(1);
    let context = json!({
        "version": env!("CARGO_PKG_VERSION"),
        "r": report,
        "charts": charts,
        "band_note": if repeated {
            "Shaded: F1's range over the repeats. Points: every repeat pooled."
        } else {
            "Shaded: F1's 95% bootstrap interval over the rows."
        },
        "drops_max": drops_max,
        "rows": rows,
    });
    let mut env = minijinja::Environment::new();
    env.add_function("fig", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("{v:.3}"))
    });
    env.add_function("signed", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("{v:+.3}"))
    });
    env.add_function("one", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("{v:.1}"))
    });
    env.add_function("money", |v: Option<f64>| {
        v.map_or("–".into(), |v| format!("${v:.5}"))
    });
    env.template_from_named_str("eval-report.html", TEMPLATE)
        .and_then(|t| t.render(context))
        .map_err(|e| ApiError::new(Code::Internal, format!("the HTML report: {e:#}")))
}

/// A cell's expected and extracted records, each with its mark.
fn side_by_side(c: &CellLine, expected: &[Value]) -> Value {
    let text = |o: &Value| without_aliases(o).to_string();
    let (expected, extracted): (Vec<Value>, Vec<Value>) = match &c.scored {
        Some(s) => {
            let mut e: Vec<&str> = vec!["missed"; expected.len()];
            let mut x: Vec<&str> = vec!["spurious"; c.extracted.len()];
            for p in &s.matched {
                let mark = if p.is_partial() { "partial" } else { "matched" };
                if let Some(m) = e.get_mut(p.expected) {
                    *m = mark;
                }
                if let Some(m) = x.get_mut(p.actual) {
                    *m = mark;
                }
            }
            (
                expected
                    .iter()
                    .zip(e)
                    .map(|(o, m)| json!({"text": text(o), "mark": m}))
                    .collect(),
                c.extracted
                    .iter()
                    .zip(x)
                    .map(|(o, m)| json!({"text": text(o), "mark": m}))
                    .collect(),
            )
        }
        None => (
            Vec::new(),
            c.extracted
                .iter()
                .map(|o| json!({"text": text(o), "mark": "unscored"}))
                .collect(),
        ),
    };
    json!({
        "prompt": c.prompt, "max_tokens": c.max_tokens, "constrained": c.constrained,
        "finish_reason": c.finish_reason, "run": c.run, "f1": c.f1,
        "tp": c.tp, "fp": c.fp, "fn": c.fn_,
        "expected": expected, "extracted": extracted,
    })
}
