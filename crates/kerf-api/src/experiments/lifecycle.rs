//! The one lifecycle of every experiment, whatever its kind:
//!
//! ```text
//!  plan ──► size ──► announce ──► begin ─────────► run the cells ──► settle
//!  (kind's)  (Size)   (on_plan,    (spec stored)    (cells::run_cells,  ok · interrupted · error
//!                      bounds)          ▲            measured cells        │
//!                                       │            left out)             │ interrupted, error,
//!                                  take up ◄───────────────────────────────┘ killed process
//!                                  (spec read, claimed, endpoints checked)
//! ```
//!
//! A kind's plan says which cells there are and what is made of each end (a compare's rows and
//! sweeps, an eval's scores, a test's verdict); this module is where every kind's experiment is
//! begun ([`begin`]), taken up again after a stop or a killed process ([`take_up`]), told which
//! of its cells are already measured ([`measured`]) and ended ([`Running::settle`]).

use std::collections::BTreeMap;

use kerf_store::{CellKey, Endpoint, Figures, Store};

use super::{ExperimentKind, ExperimentSpec};
use crate::error::{ApiError, Code, Result};
use crate::runs::Chosen;

/// An experiment this process runs: begun, or taken up again.
#[derive(Debug, Clone, Copy)]
pub struct Running<'s> {
    pub store: &'s Store,
    pub id: i64,
    pub kind: ExperimentKind,
}

/// What a kind's result says to lists: the figures kept typed beside it as it settles (an
/// eval's pending cells and summary lines, a test's verdicts, a compare's rows).
pub trait Reported: serde::Serialize {
    fn figures(&self) -> Figures {
        Figures::default()
    }
}

impl<T: Reported> Reported for &T {
    fn figures(&self) -> Figures {
        (**self).figures()
    }
}

/// A pass's result as the history keeps it: the whole, and the figures lists show of it.
pub struct Outcome {
    /// The result as JSON text, written straight from the report: a long eval's report is
    /// tens of megabytes of text, and several times that as a `serde_json::Value`.
    pub result: String,
    pub figures: Figures,
}

impl Outcome {
    pub fn of<T: Reported>(t: &T) -> Result<Outcome> {
        Ok(Outcome {
            result: serde_json::to_string(t)
                .map_err(|e| ApiError::new(Code::Internal, e.to_string()))?,
            figures: t.figures(),
        })
    }

    /// Nothing kept (a kind that keeps nothing partial).
    pub fn none() -> Outcome {
        Outcome {
            result: "null".into(),
            figures: Figures::default(),
        }
    }
}

/// How an experiment's pass ended.
pub enum End {
    /// Every cell ran: its result.
    Done(Outcome),
    /// Stopped (Ctrl-C, or a provider that refused everything) before every cell ran: what it
    /// has so far ([`Outcome::none`] when its kind keeps nothing partial). Taken up again by a
    /// resume.
    Stopped(Outcome),
    /// It could not go on: why.
    Failed(String),
}

impl End {
    /// `outcome`'s ending: its result when it ran, stopped when it was cancelled, failed
    /// otherwise.
    pub fn of<T: Reported>(outcome: &Result<T>) -> Result<End> {
        Ok(match outcome {
            Ok(t) => End::Done(Outcome::of(t)?),
            Err(e) => End::of_error(e),
        })
    }

    /// The end of a pass that stopped with `e`: stopped when it was cancelled, failed otherwise.
    pub fn of_error(e: &ApiError) -> End {
        if e.code == Code::Cancelled {
            End::Stopped(Outcome::none())
        } else {
            End::Failed(e.message.clone())
        }
    }
}

/// What a resume may do beyond running what remains: the same bounds as a start.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResumeInput {
    /// Run again the cells whose run failed (an eval keeps them unless told; a compare's and
    /// tests' failed cells always run again).
    pub retry_errors: bool,
    /// What the person resuming allowed (a pass over 2,000 requests needs it, as a start does).
    pub allowed: super::plan::Allowance,
    /// Go on although a provider's name now points at another endpoint or model than the
    /// experiment's runs came from (`--allow-endpoint-change`): it then mixes two servers.
    pub endpoint_changed: bool,
}

/// Start an experiment under `spec`: stored, `running`, owned by this process. Its runs name
/// [`Running::id`].
pub fn begin<'s>(store: &'s Store, spec: &ExperimentSpec) -> Result<Running<'s>> {
    Ok(Running {
        store,
        id: spec.begin(store)?,
        kind: spec.kind(),
    })
}

/// Experiment `id`'s spec, which must be of `kind` (another kind is a usage error naming both).
pub fn spec_of(store: &Store, id: i64, kind: ExperimentKind) -> Result<ExperimentSpec> {
    let (found, spec) = store.experiment_spec(id)?;
    if found != kind {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "experiment {id} is a {found}, not a{} {kind}",
                if kind == ExperimentKind::Eval {
                    "n"
                } else {
                    ""
                }
            ),
        ));
    }
    ExperimentSpec::read(id, found, &spec)
}

/// Take experiment `id` (of `kind`) up again: claimed by this process, its earlier end cleared.
/// One another live process runs is a conflict: two processes would buy the same cells.
pub fn take_up(store: &Store, id: i64, kind: ExperimentKind) -> Result<Running<'_>> {
    if !store.resume_experiment(id)? {
        return Err(ApiError::new(
            Code::Conflict,
            format!(
                "{kind} {id} is still running in another Kerf process; let it finish, or stop it (Ctrl-C) and resume then"
            ),
        ));
    }
    Ok(Running { store, id, kind })
}

/// The newest experiment of `kind` (what a resume with no id takes up), or an error saying
/// there is none.
pub fn latest(store: &Store, kind: ExperimentKind) -> Result<i64> {
    store.latest_experiment(kind)?.ok_or_else(|| {
        ApiError::new(
            Code::NotFound,
            format!("the history holds no {kind} to resume"),
        )
    })
}

/// How a person takes experiment `id` of `kind` up again from the command line.
pub fn resume_command(kind: ExperimentKind, id: i64) -> String {
    match kind {
        ExperimentKind::Eval => format!("kerf eval resume {id}"),
        ExperimentKind::Sweep => format!("kerf sweep … (sweeps run at once; {id} is whole)"),
        _ => format!("kerf {kind} --resume {id}"),
    }
}

impl Running<'_> {
    /// End the pass: `ok` with its result, `interrupted` (with what it has, and how to take it
    /// up again) or `error` with why.
    pub fn settle(&self, end: End) -> Result<()> {
        match end {
            End::Done(o) => self
                .store
                .finish_experiment(self.id, &o.result, &o.figures, None)?,
            End::Stopped(partial) => self.store.interrupt_experiment(
                self.id,
                &partial.result,
                &partial.figures,
                &format!(
                    "stopped before every cell ran; `{}` finishes it",
                    resume_command(self.kind, self.id)
                ),
            )?,
            End::Failed(why) => {
                self.store
                    .finish_experiment(self.id, "null", &Figures::default(), Some(&why))?
            }
        }
        Ok(())
    }

    /// Settle with `outcome` ([`End::of`]) and hand it back.
    pub fn settled<T: Reported>(&self, outcome: Result<T>) -> Result<T> {
        self.settle(End::of(&outcome)?)?;
        outcome
    }
}

/// The cells of experiment `id` already measured, with their runs: finished (ended on their
/// own or cut by their budget), and failed ones too when `keep_failed` (an eval resumes
/// without them unless `--retry-errors`). A resume leaves these out; a fresh experiment has
/// none. Read without claiming the experiment.
pub fn measured(store: &Store, id: i64, keep_failed: bool) -> Result<BTreeMap<CellKey, i64>> {
    Ok(store
        .cells(id)?
        .into_iter()
        .filter(|c| c.finished() || (keep_failed && c.status == Some(kerf_store::Status::Error)))
        .filter_map(|c| Some((c.cell, c.run?)))
        .collect())
}

/// What a resume of experiment `id` leaves out, once each of its `providers` is checked to
/// point where its runs came from ([`check_endpoints`]): the cells measured before (a failed
/// one runs again).
pub fn resumable(
    store: &Store,
    id: i64,
    kind: ExperimentKind,
    providers: &[Chosen],
    input: &ResumeInput,
) -> Result<BTreeMap<CellKey, i64>> {
    check_endpoints(store, id, kind, providers, input.endpoint_changed)?;
    measured(store, id, false)
}

/// Refuse to take experiment `id` up again when a provider's name now points elsewhere than the
/// experiment's own runs under that name came from — another protocol, base URL, or served
/// model (asked of the server) — naming both, unless `allowed`. A provider re-pointed with
/// `kerf providers add` would otherwise take the remaining cells without a word, and one
/// experiment would mix two servers.
pub fn check_endpoints(
    store: &Store,
    id: i64,
    kind: ExperimentKind,
    providers: &[Chosen],
    allowed: bool,
) -> Result<()> {
    if allowed {
        return Ok(());
    }
    let was = store.experiment_endpoints(id)?;
    for provider in providers {
        let name = provider.name();
        let mine: Vec<&Endpoint> = was
            .iter()
            // An experiment of one provider kept before runs were told apart by it is that
            // provider's.
            .filter(|(n, _)| *n == name || providers.len() == 1)
            .map(|(_, e)| e)
            .collect();
        if mine.is_empty() {
            continue;
        }
        if let Chosen::Cloud(p) = provider {
            kerf_llm::runtime::block_on(p.served_model());
        }
        let now = provider.endpoint();
        let differs = |w: &Endpoint| {
            w.protocol != now.protocol
                || w.base_url != now.base_url
                || matches!((&w.served_model, &now.served_model), (Some(a), Some(b)) if a != b)
        };
        if let Some(w) = mine.into_iter().find(|w| differs(w)) {
            let again = format!("{} --allow-endpoint-change", resume_command(kind, id));
            return Err(ApiError::new(
                Code::Conflict,
                format!(
                    "{kind} {id} ran on {} but provider `{name}` now points at {}: its remaining cells would come from another server; `{again}` goes on anyway, or point the provider back",
                    describe(w),
                    describe(&now)
                ),
            ));
        }
    }
    Ok(())
}

/// An endpoint as a person reads it: `openai at http://…, serving {…}`, or the local engine.
fn describe(e: &Endpoint) -> String {
    match (&e.protocol, &e.base_url) {
        (None, None) => "the local engine".into(),
        (p, u) => {
            let mut s = format!(
                "{} at {}",
                p.as_deref().unwrap_or("an API"),
                u.as_deref().unwrap_or("an unknown URL")
            );
            if let Some(m) = &e.served_model {
                s.push_str(&format!(" (serving {m})"));
            }
            s
        }
    }
}
