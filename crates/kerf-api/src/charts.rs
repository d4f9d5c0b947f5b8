//! One chart specification ([`Chart`]) for every chart Kerf draws: the areas build it from their
//! results (a compare's budget and sweep curves, an eval's figures against the budget, `kerf
//! sweep`'s curves), the window draws it interactively (uPlot), and [`svg`] draws it as a file —
//! `kerf sweep --svg`, the eval's HTML report and the window's "Save SVG" alike. So a chart's
//! points, labels, scales and colours are decided once, here and in the builders.

use kerf_core::sweep::Sweep;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::error::{ApiError, Code, Result};

/// A chart: series sampled at shared x values, their axes and title.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Chart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    /// The x values every series is sampled at, ascending.
    pub xs: Vec<f64>,
    pub series: Vec<Series>,
    /// Each value holds until the next x (a sweep's counts), instead of a line between points.
    pub stepped: bool,
    /// Set, the chart is a bar chart: x `i` is the category `categories[i]` (xs are `0..n`), and
    /// each series is one bar in every category's group.
    #[serde(default)]
    pub categories: Option<Vec<String>>,
}

/// An axis: its label, scale, how its ticks read, and its range where fixed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(rename = "ChartAxis")]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    pub ticks: Ticks,
    /// Fixed ends (`None`: from the data).
    pub min: Option<f64>,
    pub max: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(rename = "ChartScale")]
pub enum Scale {
    Linear,
    /// Token budgets: each doubling the same width.
    Log,
}

/// How tick labels read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "snake_case")]
#[ts(rename = "ChartTicks")]
pub enum Ticks {
    /// Whole numbers only (objects, tokens).
    Count,
    /// A fraction as a percentage (0.5 → 50%).
    Percent,
    /// A figure from 0 to 1, one decimal.
    Decimal,
}

/// One line of a chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
#[ts(rename = "ChartSeries")]
pub struct Series {
    pub name: String,
    /// `#rrggbb`, readable on white and distinct for common colour blindness.
    pub color: String,
    /// One value per x (`None`: no point there).
    pub ys: Vec<Option<f64>>,
    /// A shaded range per x (an interval, or repeats' spread), where known.
    pub band: Option<Vec<Option<[f64; 2]>>>,
    /// Mark each point (a few measured budgets), not only the line.
    pub marks: bool,
}

/// One line of a budget chart, as an area measured it.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetCurve {
    pub name: String,
    pub points: Vec<BudgetPoint>,
}

/// A value measured at a budget, and its range where known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetPoint {
    /// The budget (or, on a chart [`against`](Chart::against) another setting, that setting).
    pub budget: u32,
    pub value: f64,
    pub band: Option<[f64; 2]>,
}

impl BudgetCurve {
    /// `value` at `budget` (with its `band`) on the curve named `name`, started if new.
    pub fn add(curves: &mut Vec<BudgetCurve>, name: String, point: BudgetPoint) {
        match curves.iter_mut().find(|c| c.name == name) {
            Some(c) => c.points.push(point),
            None => curves.push(BudgetCurve {
                name,
                points: vec![point],
            }),
        }
    }
}

/// The colours series take in turn (Okabe–Ito).
const PALETTE: [(u8, u8, u8); 6] = [
    (0, 114, 178),
    (213, 94, 0),
    (0, 158, 115),
    (204, 121, 167),
    (86, 180, 233),
    (230, 159, 0),
];

/// The `i`th series' colour.
pub fn color(i: usize) -> String {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    format!("#{r:02x}{g:02x}{b:02x}")
}

impl Axis {
    pub fn new(label: impl Into<String>, scale: Scale, ticks: Ticks) -> Self {
        Axis {
            label: label.into(),
            scale,
            ticks,
            min: None,
            max: None,
        }
    }

    pub fn range(mut self, min: f64, max: f64) -> Self {
        self.min = Some(min);
        self.max = Some(max);
        self
    }
}

impl Chart {
    /// Curves of objects recovered against the fraction of a reply emitted before the cut: one
    /// step curve per `(name, sweep)`, sampled exactly at every point where any count changes.
    pub fn sweeps(title: &str, curves: &[(String, &Sweep)]) -> Chart {
        let fraction = |s: &Sweep, o: usize| o as f64 / s.length.max(1) as f64;
        let mut xs: Vec<f64> = curves
            .iter()
            .flat_map(|(_, s)| s.points.iter().map(move |&(o, _)| fraction(s, o)))
            .chain([0.0, 1.0])
            .collect();
        xs.sort_by(f64::total_cmp);
        xs.dedup();
        // `token:o200k_base` cuts at each token (of that tokenizer): the axis names the kind.
        let unit = curves
            .first()
            .map(|(_, s)| s.unit.split(':').next().unwrap_or_default().to_string())
            .unwrap_or_default();
        let series = curves
            .iter()
            .enumerate()
            .map(|(i, (name, s))| Series {
                name: name.clone(),
                color: color(i),
                ys: xs
                    .iter()
                    .map(|&x| {
                        // The count at x: the last change at or before it.
                        let n = s
                            .points
                            .iter()
                            .take_while(|&&(o, _)| fraction(s, o) <= x + 1e-12)
                            .last()
                            .map_or(0, |&(_, n)| n);
                        Some(n as f64)
                    })
                    .collect(),
                band: None,
                marks: false,
            })
            .collect();
        Chart {
            title: title.to_string(),
            x: Axis::new(
                format!("fraction of the reply emitted (cut at each {unit})"),
                Scale::Linear,
                Ticks::Percent,
            )
            .range(0.0, 1.0),
            y: Axis::new("objects recovered", Scale::Linear, Ticks::Count),
            xs,
            series,
            stepped: true,
            categories: None,
        }
    }

    /// Values against the token budget: each curve a line through its measured budgets, with a
    /// band where one is known.
    pub fn budgets(title: &str, y: Axis, curves: &[BudgetCurve]) -> Chart {
        Chart::against(title, "max_tokens (log scale)", y, curves)
    }

    /// [`Chart::budgets`] against another setting that doubles (a chunk size), `x` naming it:
    /// each curve's points are its values at that setting.
    pub fn against(title: &str, x: &str, y: Axis, curves: &[BudgetCurve]) -> Chart {
        let mut budgets: Vec<u32> = curves
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.budget))
            .collect();
        budgets.sort_unstable();
        budgets.dedup();
        let series = curves
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let at = |b: u32| c.points.iter().find(|p| p.budget == b);
                let band: Vec<Option<[f64; 2]>> = budgets
                    .iter()
                    .map(|&b| at(b).and_then(|p| p.band))
                    .collect();
                Series {
                    name: c.name.clone(),
                    color: color(i),
                    ys: budgets.iter().map(|&b| at(b).map(|p| p.value)).collect(),
                    band: band.iter().any(Option::is_some).then_some(band),
                    marks: true,
                }
            })
            .collect();
        Chart {
            title: title.to_string(),
            x: Axis::new(x, Scale::Log, Ticks::Count),
            y,
            xs: budgets.iter().map(|&b| f64::from(b)).collect(),
            series,
            stepped: false,
            categories: None,
        }
    }

    /// Grouped bars: a group per category (named by `x`), a bar per series in each (`values[i]`
    /// is the series' bar in category `i`).
    pub fn bars(
        title: &str,
        x: &str,
        y: Axis,
        categories: Vec<String>,
        series: Vec<(String, Vec<f64>)>,
    ) -> Chart {
        // At least four groups' width, the groups centred: one reason is not a wall of colour.
        let pad = 0.5 + 4usize.saturating_sub(categories.len()) as f64 / 2.0;
        let last = categories.len().saturating_sub(1) as f64;
        Chart {
            title: title.to_string(),
            x: Axis::new(x, Scale::Linear, Ticks::Count).range(-pad, last + pad),
            y,
            xs: (0..categories.len()).map(|i| i as f64).collect(),
            series: series
                .into_iter()
                .enumerate()
                .map(|(i, (name, values))| Series {
                    name,
                    color: color(i),
                    ys: values.into_iter().map(Some).collect(),
                    band: None,
                    marks: false,
                })
                .collect(),
            stepped: false,
            categories: Some(categories),
        }
    }
}

/// `chart` as a standalone SVG document, `width` × `height` pixels.
pub fn svg(chart: &Chart, width: u32, height: u32) -> Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (width, height)).into_drawing_area();
        draw(chart, &root).map_err(|e| ApiError::new(Code::Internal, format!("chart: {e}")))?;
    }
    Ok(out)
}

type Drawn = std::result::Result<(), Box<dyn std::error::Error>>;

/// Where `x` is drawn: a log scale is drawn as a linear one in log₂ x, so both scales take the
/// one path below (and a log axis's ticks fall on powers of two).
fn place(scale: Scale, x: f64) -> f64 {
    match scale {
        Scale::Linear => x,
        Scale::Log => x.max(f64::MIN_POSITIVE).log2(),
    }
}

fn rgb(hex: &str) -> RGBColor {
    let c = |i: usize| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("00"), 16).unwrap_or(0);
    RGBColor(c(1), c(3), c(5))
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// The top of the y axis: fixed, or a little above the highest value.
fn y_top(chart: &Chart) -> f64 {
    chart.y.max.unwrap_or_else(|| {
        let top = chart
            .series
            .iter()
            .flat_map(|s| s.ys.iter().flatten())
            .copied()
            .fold(0.0, f64::max);
        top.max(1.0) * 1.05
    })
}

fn draw(chart: &Chart, root: &Area<'_>) -> Drawn {
    root.fill(&WHITE)?;
    if let Some(categories) = &chart.categories {
        return draw_bars(chart, categories, root);
    }
    let scale = chart.x.scale;
    let (x0, x1) = x_range(chart);
    let y_max = y_top(chart);
    let y_min = chart.y.min.unwrap_or(0.0);
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(56)
        .build_cartesian_2d(place(scale, x0)..place(scale, x1), y_min..y_max)?;
    let y_tick = |v: &f64| tick(chart.y.ticks, *v);
    let x_tick = |v: &f64| tick(chart.x.ticks, *v);
    let mut mesh = c.configure_mesh();
    mesh.x_desc(chart.x.label.as_str())
        .y_desc(chart.y.label.as_str())
        .light_line_style(WHITE)
        .y_label_formatter(&y_tick)
        .axis_desc_style(("sans-serif", 14));
    match scale {
        Scale::Linear => mesh.x_labels(8).x_label_formatter(&x_tick).draw()?,
        // A log axis is ticked by hand where [`log_ticks`] says (the mesh's own ticks fall on
        // round numbers of log₂ x).
        Scale::Log => mesh.disable_x_mesh().x_labels(0).draw()?,
    }
    if scale == Scale::Log {
        let under = ("sans-serif", 12)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        for k in log_ticks(chart, x0, x1) {
            c.draw_series(std::iter::once(PathElement::new(
                vec![(k, y_min), (k, y_max)],
                RGBColor(214, 219, 227).stroke_width(1),
            )))?;
            let (x, y) = c.backend_coord(&(k, y_min));
            root.draw(&Text::new(
                tick(chart.x.ticks, k.exp2().round()),
                (x, y + 6),
                under.clone(),
            ))?;
        }
    }
    for s in &chart.series {
        let colour = rgb(&s.color);
        if let Some(band) = &s.band {
            let known: Vec<(f64, [f64; 2])> = chart
                .xs
                .iter()
                .zip(band)
                .filter_map(|(&x, r)| r.map(|r| (place(scale, x), r)))
                .collect();
            if known.len() >= 2 {
                let mut outline: Vec<(f64, f64)> = known.iter().map(|(x, r)| (*x, r[1])).collect();
                outline.extend(known.iter().rev().map(|(x, r)| (*x, r[0])));
                c.draw_series(std::iter::once(Polygon::new(
                    outline,
                    colour.mix(0.18).filled(),
                )))?;
            } else if let Some((x, r)) = known.first() {
                c.draw_series(std::iter::once(PathElement::new(
                    vec![(*x, r[0]), (*x, r[1])],
                    colour.mix(0.4).stroke_width(6),
                )))?;
            }
        }
        // A line through the known points: one missing at a shared x (a budget this curve was
        // not measured at) is passed over, as the window draws it.
        let mut line: Vec<(f64, f64)> = Vec::new();
        for (&x, y) in chart.xs.iter().zip(&s.ys) {
            let Some(y) = *y else { continue };
            let x = place(scale, x);
            if chart.stepped
                && let Some(&(_, before)) = line.last()
            {
                // The count holds until this change.
                line.push((x, before));
            }
            line.push((x, y));
        }
        if s.marks {
            c.draw_series(line.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
        }
        c.draw_series(LineSeries::new(line, colour.stroke_width(3)))?
            .label(s.name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
            });
    }
    let legend_at = if chart.stepped {
        SeriesLabelPosition::UpperLeft
    } else if low_on_the_right(chart, y_min, y_max) {
        // Curves that end low (recall near 0 at every chunk size): the box above them.
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::LowerRight
    };
    legend_and_present(&mut c, root, legend_at)
}

/// Where a log axis is ticked (in log₂ x): at each measured x, when there are few (chunk sizes
/// of 500, 1000 and 2000 read as such, not as the powers of two near them); else at the powers
/// of two in the range.
fn log_ticks(chart: &Chart, x0: f64, x1: f64) -> Vec<f64> {
    if !chart.xs.is_empty() && chart.xs.len() <= 10 {
        return chart.xs.iter().map(|&x| place(Scale::Log, x)).collect();
    }
    let (lo, hi) = (place(Scale::Log, x0).ceil(), place(Scale::Log, x1).floor());
    let step = ((hi - lo) / 8.0).ceil().max(1.0);
    let mut keys = Vec::new();
    let mut k = lo;
    while k <= hi {
        keys.push(k);
        k += step;
    }
    keys
}

/// Whether every point in the right third of the chart is in the lower half of its y range,
/// where the legend box would otherwise sit on the curves.
fn low_on_the_right(chart: &Chart, y_min: f64, y_max: f64) -> bool {
    let n = chart.xs.len();
    let from = n - n / 3;
    let mid = y_min + (y_max - y_min) / 2.0;
    n > 0
        && chart.series.iter().all(|s| {
            s.ys.iter()
                .skip(from.min(n.saturating_sub(1)))
                .flatten()
                .all(|&y| y < mid)
        })
}

/// A drawn chart's plotting area (on the document being written, borrowed for as long).
type Plot<'a> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The series' names in a box at `at`, and the document finished.
fn legend_and_present(c: &mut Plot<'_>, root: &Area<'_>, at: SeriesLabelPosition) -> Drawn {
    c.configure_series_labels()
        .position(at)
        .label_font(("sans-serif", 14))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Grouped bars, each category's name under its group (drawn by hand: the mesh's own labels
/// fall on whatever round numbers it picks, not on every category).
fn draw_bars(chart: &Chart, categories: &[String], root: &Area<'_>) -> Drawn {
    let n = categories.len().max(1) as f64;
    let (x0, x1) = (chart.x.min.unwrap_or(-0.5), chart.x.max.unwrap_or(n - 0.5));
    let mut c = ChartBuilder::on(root)
        .caption(&chart.title, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(52)
        .y_label_area_size(56)
        .build_cartesian_2d(x0..x1, chart.y.min.unwrap_or(0.0)..y_top(chart))?;
    let y_tick = |v: &f64| tick(chart.y.ticks, *v);
    c.configure_mesh()
        .x_desc(chart.x.label.as_str())
        .y_desc(chart.y.label.as_str())
        .disable_x_mesh()
        .x_labels(0)
        .light_line_style(WHITE)
        .y_label_formatter(&y_tick)
        .axis_desc_style(("sans-serif", 14))
        .draw()?;
    // The bars of a group share 80% of its width, side by side.
    let width = 0.8 / chart.series.len().max(1) as f64;
    for (k, s) in chart.series.iter().enumerate() {
        let colour = rgb(&s.color);
        let bars = s.ys.iter().enumerate().filter_map(|(i, y)| {
            let left = i as f64 - 0.4 + k as f64 * width;
            y.map(|y| Rectangle::new([(left, 0.0), (left + width * 0.92, y)], colour.filled()))
        });
        c.draw_series(bars)?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], colour.filled()));
    }
    let under = ("sans-serif", 13)
        .into_font()
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    for (i, name) in categories.iter().enumerate() {
        let (x, y) = c.backend_coord(&(i as f64, chart.y.min.unwrap_or(0.0)));
        root.draw(&Text::new(name.as_str(), (x, y + 8), under.clone()))?;
    }
    legend_and_present(&mut c, root, SeriesLabelPosition::UpperRight)
}

/// The x range: fixed, or the data's — with a little room either side on a log scale (a third
/// of a doubling), so the end points are not on the frame.
fn x_range(chart: &Chart) -> (f64, f64) {
    let lo = chart.xs.first().copied().unwrap_or(0.0);
    let hi = chart.xs.last().copied().unwrap_or(1.0);
    let (lo, hi) = match chart.x.scale {
        Scale::Log => {
            let lo = lo.max(1.0);
            (lo / 1.25, hi.max(lo * 2.0) * 1.25)
        }
        Scale::Linear if hi > lo => (lo, hi),
        Scale::Linear => (lo, lo + 1.0),
    };
    (chart.x.min.unwrap_or(lo), chart.x.max.unwrap_or(hi))
}

fn tick(ticks: Ticks, v: f64) -> String {
    match ticks {
        Ticks::Count if (v - v.round()).abs() < 1e-9 => format!("{v:.0}"),
        Ticks::Count => String::new(),
        Ticks::Percent => format!("{:.0}%", v * 100.0),
        Ticks::Decimal => format!("{v:.1}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep(points: Vec<(usize, usize)>, length: usize) -> Sweep {
        Sweep {
            total: points.last().map_or(0, |p| p.1),
            points,
            score: 0.5,
            unit: "token:o200k_base".into(),
            length,
        }
    }

    #[test]
    fn a_sweep_is_a_step_curve_sampled_at_every_change_of_any_series() {
        let a = sweep(vec![(0, 0), (10, 1), (20, 2), (40, 3)], 40);
        let b = sweep(vec![(0, 0), (50, 2), (100, 2)], 100);
        let chart = Chart::sweeps("cut", &[("a".into(), &a), ("b".into(), &b)]);
        assert_eq!(chart.xs, [0.0, 0.25, 0.5, 1.0]);
        assert_eq!(
            chart.series[0].ys,
            [Some(0.0), Some(1.0), Some(2.0), Some(3.0)]
        );
        assert_eq!(
            chart.series[1].ys,
            [Some(0.0), Some(0.0), Some(2.0), Some(2.0)]
        );
        assert!(chart.stepped);
        assert_eq!(
            chart.x.label,
            "fraction of the reply emitted (cut at each token)"
        );
        assert_ne!(chart.series[0].color, chart.series[1].color);
    }

    fn curves(points: &[(&str, u32, f64, Option<[f64; 2]>)]) -> Vec<BudgetCurve> {
        let mut curves = Vec::new();
        for &(name, budget, value, band) in points {
            BudgetCurve::add(
                &mut curves,
                name.into(),
                BudgetPoint {
                    budget,
                    value,
                    band,
                },
            );
        }
        curves
    }

    #[test]
    fn budget_curves_share_the_sorted_budgets_and_keep_their_gaps_and_bands() {
        let chart = Chart::budgets(
            "F1",
            Axis::new("F1", Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
            &curves(&[
                ("kg", 128, 0.9, Some([0.8, 1.0])),
                ("kg", 32, 0.5, None),
                ("kg-array", 32, 0.1, None),
            ]),
        );
        assert_eq!(chart.xs, [32.0, 128.0]);
        assert_eq!(chart.series[0].ys, [Some(0.5), Some(0.9)]);
        assert_eq!(chart.series[1].ys, [Some(0.1), None]);
        assert_eq!(chart.series[0].band, Some(vec![None, Some([0.8, 1.0])]));
        assert_eq!(chart.series[1].band, None);
        assert_eq!(chart.x.scale, Scale::Log);
    }

    #[test]
    fn the_svg_is_one_document_with_every_series_named_and_escaped() {
        let a = sweep(vec![(0, 0), (10, 1), (40, 3)], 40);
        let chart = Chart::sweeps(
            "Objects <cut> & kept",
            &[("a & b".into(), &a), ("c".into(), &a)],
        );
        let doc = svg(&chart, 760, 380).expect("drawn");
        assert!(doc.starts_with("<svg"), "{}", &doc[..60]);
        assert!(doc.contains("Objects &lt;cut&gt; &amp; kept"));
        // plotters writes each text on a line of its own.
        assert!(
            doc.contains("\na &amp; b\n") && doc.contains("\nc\n"),
            "{doc}"
        );
        // A chart on a log scale with few points: ticked at each (chunk sizes read as such).
        let sizes = Chart::against(
            "recall",
            "chunk size",
            Axis::new("recall", Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
            &curves(&[("kg", 500, 0.5, None), ("kg", 2000, 0.9, None)]),
        );
        let doc = svg(&sizes, 760, 380).expect("drawn");
        assert!(doc.contains("\n500\n") && doc.contains("\n2000\n"), "{doc}");
        assert!(
            !doc.contains("\n512\n") && !doc.contains("\n1024\n"),
            "{doc}"
        );
        // With many, at powers of two.
        let many: Vec<(&str, u32, f64, Option<[f64; 2]>)> =
            (0..12).map(|i| ("kg", 100 + 150 * i, 0.5, None)).collect();
        let budgets = Chart::budgets(
            "recall",
            Axis::new("recall", Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
            &curves(&many),
        );
        let doc = svg(&budgets, 760, 380).expect("drawn");
        assert!(doc.contains("\n128\n") && doc.contains("\n1024\n"), "{doc}");
    }

    #[test]
    fn the_legend_moves_above_curves_that_end_low() {
        let low = Chart::budgets(
            "recall",
            Axis::new("recall", Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
            &curves(&[("kg", 64, 0.5, None), ("kg", 512, 0.1, None)]),
        );
        assert!(low_on_the_right(&low, 0.0, 1.02));
        let high = Chart::budgets(
            "recall",
            Axis::new("recall", Scale::Linear, Ticks::Decimal).range(0.0, 1.02),
            &curves(&[("kg", 64, 0.1, None), ("kg", 512, 0.9, None)]),
        );
        assert!(!low_on_the_right(&high, 0.0, 1.02));
    }

    #[test]
    fn a_bar_chart_names_every_category_under_its_group_and_draws_each_bar() {
        let chart = Chart::bars(
            "Why pieces were dropped",
            "reason",
            Axis::new("pieces", Scale::Linear, Ticks::Count),
            vec!["truncated".into(), "schema".into(), "invalid_json".into()],
            vec![
                ("kg".into(), vec![7.0, 2.0, 0.0]),
                ("kg-array".into(), vec![1.0, 0.0, 3.0]),
            ],
        );
        assert_eq!(chart.xs, [0.0, 1.0, 2.0]);
        // Fewer than four groups are centred in four groups' width.
        assert_eq!((chart.x.min, chart.x.max), (Some(-1.0), Some(3.0)));
        assert_eq!(chart.series[1].ys, [Some(1.0), Some(0.0), Some(3.0)]);
        let doc = svg(&chart, 760, 380).expect("drawn");
        for name in ["truncated", "schema", "invalid_json", "kg", "kg-array"] {
            assert!(doc.contains(&format!("\n{name}\n")), "{name} in {doc}");
        }
        // One filled rectangle per bar (six), plus the two legend swatches, in the series' colours.
        let filled = |colour: String| {
            doc.matches(&format!("fill=\"{}\"", colour.to_uppercase()))
                .count()
        };
        assert!(filled(color(0)) == 4 && filled(color(1)) == 4, "{doc}");
        // Stored before bar charts existed, a chart reads back as lines.
        let mut old = serde_json::to_value(&chart).expect("serialised");
        old.as_object_mut().expect("an object").remove("categories");
        let back: Chart = serde_json::from_value(old).expect("read back");
        assert_eq!(back.categories, None);
    }
}
