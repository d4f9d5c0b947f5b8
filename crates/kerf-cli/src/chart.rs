//! SVG charts for reports and CI (plotters). The desktop app draws its own interactive charts.

use std::path::Path;

use anyhow::Result;
use kerf_core::sweep::Sweep;
use plotters::prelude::*;

/// One colour per format, readable on white and distinct for common colour blindness.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
];

/// Recovered objects vs fraction of the reply emitted, one step curve per named sweep.
pub fn sweep_svg(path: &Path, curves: &[(String, &Sweep)]) -> Result<()> {
    let max = curves
        .iter()
        .map(|(_, s)| s.total)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let unit = curves
        .first()
        .map(|(_, s)| s.unit.clone())
        .unwrap_or_default();
    let root = SVGBackend::new(path, (900, 520)).into_drawing_area();
    let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "Objects recovered if the reply is cut off",
                ("sans-serif", 24),
            )
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..1f64, 0f64..max * 1.05)?;
        chart
            .configure_mesh()
            .x_desc(format!(
                "fraction of the reply emitted before the cut (cuts in {unit}s)"
            ))
            .y_desc("objects recovered")
            .x_label_formatter(&|x| format!("{:.0}%", x * 100.0))
            .y_label_formatter(&|y| {
                if y.fract() == 0.0 {
                    format!("{y:.0}")
                } else {
                    String::new()
                }
            })
            .axis_desc_style(("sans-serif", 16))
            .draw()?;
        for (i, (name, sweep)) in curves.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let length = sweep.length.max(1) as f64;
            // A step curve: the count holds until the next change point.
            let mut pts: Vec<(f64, f64)> = Vec::with_capacity(sweep.points.len() * 2);
            for (j, &(o, n)) in sweep.points.iter().enumerate() {
                let x = o as f64 / length;
                if j > 0 {
                    pts.push((x, pts.last().map(|p| p.1).unwrap_or(0.0)));
                }
                pts.push((x, n as f64));
            }
            let label = format!("{name}: {} objects, score {:.3}", sweep.total, sweep.score);
            chart
                .draw_series(LineSeries::new(pts, colour.stroke_width(3)))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 15))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| kerf_core::Error::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(())
}

/// One prompt's curve against the token budget: (budget, value, band) per measured budget.
pub struct BudgetCurve {
    pub name: String,
    pub points: Vec<(u32, f64, Option<[f64; 2]>)>,
}

/// `metric` (0–1) against the output token budget (a log scale), one line per curve with its
/// band shaded; as SVG text, for a self-contained HTML report.
pub fn budget_svg(title: &str, metric: &str, curves: &[BudgetCurve]) -> Result<String> {
    let budgets = curves.iter().flat_map(|c| c.points.iter().map(|p| p.0));
    let (lo, hi) = budgets.fold((u32::MAX, 0), |(lo, hi), b| (lo.min(b), hi.max(b)));
    let (lo, hi) = if lo > hi {
        (1.0, 2.0)
    } else {
        // A little room either side, so the end points are not on the frame.
        (f64::from(lo) / 1.25, f64::from(hi) * 1.25)
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 380)).into_drawing_area();
        let draw = || -> std::result::Result<(), Box<dyn std::error::Error>> {
            root.fill(&WHITE)?;
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 20))
                .margin(16)
                .x_label_area_size(44)
                .y_label_area_size(52)
                .build_cartesian_2d((lo..hi).log_scale(), 0f64..1.02f64)?;
            chart
                .configure_mesh()
                .x_desc("max_tokens (log scale)")
                .y_desc(metric)
                .x_labels(6)
                .light_line_style(WHITE)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.1}"))
                .axis_desc_style(("sans-serif", 14))
                .draw()?;
            for (i, c) in curves.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                let band: Vec<(f64, [f64; 2])> = c
                    .points
                    .iter()
                    .filter_map(|(b, _, band)| band.map(|r| (f64::from(*b), r)))
                    .collect();
                if band.len() >= 2 {
                    let mut outline: Vec<(f64, f64)> =
                        band.iter().map(|(b, r)| (*b, r[1])).collect();
                    outline.extend(band.iter().rev().map(|(b, r)| (*b, r[0])));
                    chart.draw_series(std::iter::once(Polygon::new(
                        outline,
                        colour.mix(0.18).filled(),
                    )))?;
                } else if let Some((b, r)) = band.first() {
                    chart.draw_series(std::iter::once(PathElement::new(
                        vec![(*b, r[0]), (*b, r[1])],
                        colour.mix(0.4).stroke_width(6),
                    )))?;
                }
                let pts: Vec<(f64, f64)> = c
                    .points
                    .iter()
                    .map(|(b, v, _)| (f64::from(*b), *v))
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(3)))?
                    .label(c.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
                    });
                chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 4, colour.filled())))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .label_font(("sans-serif", 14))
                .background_style(WHITE.mix(0.9))
                .border_style(BLACK)
                .draw()?;
            root.present()?;
            Ok(())
        };
        draw().map_err(|e| {
            kerf_api::ApiError::new(kerf_api::Code::Internal, format!("chart: {e}"))
        })?;
    }
    Ok(svg)
}
