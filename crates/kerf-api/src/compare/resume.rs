//! Taking a compare up again (`kerf compare --resume`): the compare as the history keeps it,
//! what remains of it, and the rows of the cells measured before, read back from their runs.

use super::*;

/// Compare `id` as the history keeps it, ready to be taken up again: each contender's prompt
/// version rendered again with its kept input, named as its cells are; its budgets, constraint
/// and concurrency; its providers built again from the spec.
struct Stored {
    contenders: Vec<Contender>,
    budgets: Vec<u32>,
    constrain: ConstrainMode,
    settings: RunSettings,
    providers: Vec<Chosen>,
    concurrency: usize,
}

fn stored(wb: &crate::workbench::Workbench, store: &Store, id: i64) -> Result<Stored> {
    let ExperimentSpec::Compare(spec) = lifecycle::spec_of(store, id, ExperimentKind::Compare)?
    else {
        return Err(ApiError::new(
            Code::StoreCorrupt,
            format!("compare {id}'s spec is not a compare's"),
        ));
    };
    if spec.contenders.len() != spec.prompts.len() {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "compare {id} was kept by a Kerf that did not keep its prompts' text and input, so it cannot be taken up again: run the compare afresh"
            ),
        ));
    }
    let contenders = spec
        .contenders
        .iter()
        .zip(&spec.prompts)
        .map(|(c, name)| {
            let subject = c.prompt.load(store, &format!("compare {id}'s prompt"))?;
            let input = store.input(&c.input)?;
            let object = |v: Value| v.as_object().cloned().unwrap_or_default();
            let rendering =
                Rendering::of_vars(&subject.prompt, object(input.vars), object(input.terms))?;
            Ok(Contender {
                subject,
                rendering,
                name: name.clone(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let first = SpecSettings::first(&spec.providers, &format!("compare {id}"))?;
    Ok(Stored {
        contenders,
        budgets: spec.max_tokens,
        constrain: spec.constrain,
        settings: first.run_params()?.settings,
        providers: crate::experiments::spec::providers(wb, &spec.providers)?,
        concurrency: spec.concurrency,
    })
}

/// Compare `id`, ready to be taken up again where it stopped (Ctrl-C, a killed process, a
/// provider that refused): built again from the history, each provider checked to be where its
/// runs came from, what remains sized against the same bounds as a start — nothing claimed,
/// stored or sent yet ([`Resumption::size`] is what `--dry-run` announces).
pub struct Resumption {
    id: i64,
    stored: Stored,
    allowed: Allowance,
    measured: BTreeMap<CellKey, i64>,
    size: Size,
}

/// Compare `id` as a [`Resumption`].
pub fn resumption(
    wb: &crate::workbench::Workbench,
    store: &Store,
    id: i64,
    input: lifecycle::ResumeInput,
) -> Result<Resumption> {
    let stored = stored(wb, store, id)?;
    let measured = lifecycle::resumable(
        store,
        id,
        ExperimentKind::Compare,
        &stored.providers,
        &input,
    )?;
    let size = stored
        .job(input.allowed)
        .remaining(&stored.providers, &measured)?;
    Ok(Resumption {
        id,
        stored,
        allowed: input.allowed,
        measured,
        size,
    })
}

impl Stored {
    fn job(&self, allowed: Allowance) -> CompareJob<'_> {
        CompareJob {
            contenders: &self.contenders,
            budgets: &self.budgets,
            constrain: self.constrain,
            settings: &self.settings,
            concurrency: self.concurrency,
            allowed,
        }
    }
}

impl Resumption {
    /// What the pass will send: the cells not measured before.
    pub fn size(&self) -> &Size {
        &self.size
    }

    /// Claim the compare and run what remains; the cells measured before are not bought again,
    /// and the result holds every cell and sweeps as a whole compare's does. Returns the
    /// contenders too (the report names them).
    pub fn run(
        self,
        store: &Store,
        cancel: &CancelToken,
        on_progress: &mut dyn FnMut(CompareProgress),
    ) -> Result<(Compared, Vec<Contender>)> {
        let running = lifecycle::take_up(store, self.id, ExperimentKind::Compare)?;
        let s = &self.stored;
        let result = run_all(
            Some(&running),
            &s.job(self.allowed),
            &s.budgets,
            &s.providers,
            &self.measured,
            cancel,
            on_progress,
        );
        let compared = settle(&running, result, &s.contenders)?;
        Ok((compared, self.stored.contenders))
    }
}

/// Cell `a`'s row as its run kept it (a resume): the reply as received, its parse (made again
/// with the contender's parser where the run kept none), how it ended.
pub(super) fn stored_row(a: &At, c: &Contender, kept: &kerf_store::StoredReply) -> Row {
    let raw = kept.raw.clone().unwrap_or_default();
    let report = kept
        .report
        .clone()
        .unwrap_or_else(|| c.subject.prompt.parse(&raw, &c.rendering.vars));
    let details = kept
        .details
        .clone()
        .and_then(|d| serde_json::from_value(d).ok())
        .unwrap_or_else(|| kerf_llm::details::RunDetails::Other {
            provider: kept.cell.cell.provider.clone(),
        });
    Row {
        run_id: kept.cell.run,
        subject: a.contender,
        provider: a.provider,
        max_tokens: a.budget,
        constrained: a.constrained,
        seconds: kept.seconds.unwrap_or(0.0),
        out: Outcomes {
            finish: kerf_llm::Finish {
                reason: kept.finish_reason.unwrap_or(FinishReason::Error),
                usage: kerf_llm::Usage {
                    completion_tokens: kept
                        .completion_tokens
                        .and_then(|n| u32::try_from(n).ok())
                        .unwrap_or(0),
                    ..Default::default()
                },
                timings: Default::default(),
                error: None,
                details,
            },
            raw,
            report,
            earlier: Vec::new(),
        },
    }
}

/// The Compare screen's Resume of compare `id` (a stopped one, from History): what remains run
/// as `kerf compare --resume` runs it, each cell's end on `on_progress`; the whole compare's
/// report. `confirmed`: the person agreed to send more than 2,000 requests.
pub fn resume_in_window(
    wb: &crate::workbench::Workbench,
    id: i64,
    confirmed: bool,
    cancel: &CancelToken,
    on_progress: &mut dyn FnMut(CompareProgress),
) -> Result<Report> {
    let store = wb.store_required()?;
    let input = lifecycle::ResumeInput {
        allowed: Allowance {
            max_requests: None,
            yes: confirmed,
        },
        ..Default::default()
    };
    let (compared, contenders) =
        resumption(wb, &store, id, input)?.run(&store, cancel, on_progress)?;
    Ok(compared.report(&contenders))
}
