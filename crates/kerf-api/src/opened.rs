//! A stored experiment opened again, to be shown where it belongs: a compare in the Compare
//! screen (its table, charts and side-by-side replies), a sweep's curves, a test's verdicts; an
//! eval opens in Evaluate through [`crate::eval::flow::show`]. Read from the record the history
//! keeps ([`ExperimentSpec`] and the result every front end printed), never run again.
//!
//! Above the areas it opens (compare, sweeps, tests): none of them depends on this.

use kerf_store::{Status, Store};
use serde::Serialize;
use serde_json::Value;
use ts_rs::TS;

use crate::charts::Chart;
use crate::compare::{self, wire::Comparison};
use crate::error::{ApiError, Code, Result};
use crate::eval::suites::TestReport;
use crate::experiments::ExperimentSpec;
use crate::experiments::spec::{CompareSpec, SweepSpec, TestSpec};
use crate::experiments::sweep::SweepReport;

/// A stored experiment as its screen shows it.
// Made once per "Open" and serialised at once: boxing the larger variants would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OpenedExperiment {
    Compare {
        id: i64,
        spec: CompareSpec,
        comparison: Comparison,
    },
    Sweep {
        id: i64,
        spec: SweepSpec,
        curves: Vec<SweptCurve>,
        chart: Chart,
    },
    Test {
        id: i64,
        spec: TestSpec,
        report: TestReport,
    },
    /// Evaluate opens it (its matrix, and Resume when cells are left).
    Eval { id: i64 },
}

/// One reply of a stored sweep.
#[derive(Debug, Clone, PartialEq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct SweptCurve {
    pub name: String,
    /// Objects in the whole reply.
    pub total: u32,
    /// Units in the whole reply.
    pub length: u32,
    /// Mean fraction of objects recovered over all cuts.
    pub score: f64,
    pub unit: String,
}

/// Experiment `id` of `store`, as its screen shows it. One still running, failed, or stopped
/// before it had a result is an error that says so.
pub fn open(store: &Store, id: i64) -> Result<OpenedExperiment> {
    // An eval's screen reads its cells, not its kept result (for a long document, the whole
    // report): look at what it is before reading that.
    let (kind, spec) = store.experiment_spec(id)?;
    let spec = ExperimentSpec::read(id, kind, &spec)?;
    if let ExperimentSpec::Eval(_) = spec {
        return Ok(OpenedExperiment::Eval { id });
    }
    let e = store.experiment(id)?;
    // A pass that stopped keeps `null` as its result: no result either.
    let result = match (e.result.as_ref().filter(|r| !r.is_null()), e.summary.status) {
        (Some(r), _) => r,
        (None, Status::Running | Status::Submitted) => {
            return Err(ApiError::new(
                Code::Conflict,
                format!("{kind} {id} is still running: it has no result to show yet"),
            ));
        }
        (None, _) => {
            let why = e.error.as_deref().unwrap_or("it stopped before it had one");
            return Err(ApiError::new(
                Code::Conflict,
                format!("{kind} {id} has no result to show: {why}"),
            ));
        }
    };
    Ok(match spec {
        ExperimentSpec::Compare(spec) => {
            let report: compare::Report = read(id, result)?;
            OpenedExperiment::Compare {
                id,
                spec,
                comparison: Comparison::from(&report),
            }
        }
        ExperimentSpec::Sweep(spec) => {
            let named: Vec<(String, kerf_core::sweep::Sweep)> = match read(id, result)? {
                SweepReport::One(s) => {
                    let name = spec
                        .replies
                        .first()
                        .map_or_else(String::new, |r| r.name.clone());
                    vec![(name, s)]
                }
                SweepReport::Compare { compare } => {
                    compare.into_iter().map(|n| (n.name, n.sweep)).collect()
                }
            };
            let curves = named
                .iter()
                .map(|(name, s)| SweptCurve {
                    name: name.clone(),
                    total: s.total as u32,
                    length: s.length as u32,
                    score: s.score,
                    unit: s.unit.clone(),
                })
                .collect();
            let refs: Vec<(String, &kerf_core::sweep::Sweep)> =
                named.iter().map(|(n, s)| (n.clone(), s)).collect();
            OpenedExperiment::Sweep {
                id,
                spec,
                curves,
                chart: Chart::sweeps("Objects recovered if each reply were cut", &refs),
            }
        }
        ExperimentSpec::Test(spec) => OpenedExperiment::Test {
            id,
            spec,
            report: read(id, result)?,
        },
        ExperimentSpec::Eval(_) => unreachable!("returned above"),
    })
}

/// A stored result read as what Kerf wrote for its kind.
fn read<T: serde::de::DeserializeOwned>(id: i64, result: &Value) -> Result<T> {
    T::deserialize(result).map_err(|err| {
        ApiError::new(
            Code::StoreCorrupt,
            format!("experiment {id}'s result is not what Kerf wrote: {err}"),
        )
    })
}
