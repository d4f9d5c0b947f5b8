//! A compare's result as every front end shows it: rows and sweeps named by prompt and
//! provider (`kerf compare --json` is its serialisation), and its charts.

use super::*;

/// One run of a compare, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportRow {
    pub prompt: String,
    /// The provider it ran on, in a compare of several (empty, and left out of the JSON, in a
    /// compare of one: its output is what it always was).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    pub objects: usize,
    pub dropped: DropCounts,
    pub truncated: bool,
    pub finish_reason: FinishReason,
    pub completion_tokens: u32,
    pub seconds: f64,
    pub history_id: Option<i64>,
}

/// One format's reply swept, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportSweep {
    pub prompt: String,
    /// The provider the reply came from, in a compare of several (as a row's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider: String,
    pub response_type: ResponseType,
    pub max_tokens: u32,
    pub constrained: bool,
    pub cut_by_budget: bool,
    /// The swept run in the history.
    pub history_id: Option<i64>,
    /// The swept reply's length in tokens, as the model counted them (shown beside the curve;
    /// the row with the same prompt, budget and constraint has it too).
    #[serde(skip, default)]
    pub completion_tokens: u32,
    #[serde(flatten)]
    pub sweep: Sweep,
}

/// A compare's result as every front end reports it: `kerf compare --json` prints this, the
/// history keeps it as the experiment's result, and the Compare screen draws
/// [`wire::Comparison`], built from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The first provider's model.
    pub model: String,
    /// Each provider and its model, in the compare's order, in a compare of several (empty,
    /// and left out of the JSON, in a compare of one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub providers: Vec<ReportProvider>,
    pub experiment: Option<i64>,
    pub rows: Vec<ReportRow>,
    pub sweeps: Vec<ReportSweep>,
}

/// A provider of a compare and the model it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportProvider {
    pub provider: String,
    pub model: String,
}

/// A prompt's pass as a chart names it: `kg (jsonl, constrained)`, with its provider when the
/// compare has several (`kg on openai (jsonl)`).
fn pass_name(
    prompt: &str,
    provider: Option<&str>,
    response_type: ResponseType,
    constrained: bool,
) -> String {
    format!(
        "{prompt}{} ({response_type}{})",
        provider.map_or_else(String::new, |p| format!(" on {p}")),
        if constrained { ", constrained" } else { "" }
    )
}

impl Report {
    /// The provider to name beside a prompt: `provider` when the compare has several.
    fn named<'r>(&self, provider: &'r str) -> Option<&'r str> {
        (self.providers.len() > 1).then_some(provider)
    }

    /// Objects recovered against the budget: a line per prompt, provider and pass.
    pub fn budget_chart(&self) -> Chart {
        let mut curves = Vec::new();
        for r in &self.rows {
            BudgetCurve::add(
                &mut curves,
                pass_name(
                    &r.prompt,
                    self.named(&r.provider),
                    r.response_type,
                    r.constrained,
                ),
                BudgetPoint {
                    budget: r.max_tokens,
                    value: r.objects as f64,
                    band: None,
                },
            );
        }
        Chart::budgets(
            "Objects recovered vs max_tokens",
            Axis::new("objects", Scale::Linear, Ticks::Count),
            &curves,
        )
    }

    /// Each format's best reply cut at every unit (`None`: no reply had objects to sweep).
    pub fn sweep_chart(&self) -> Option<Chart> {
        let curves: Vec<(String, &Sweep)> = self
            .sweeps
            .iter()
            .map(|f| {
                let name = pass_name(
                    &f.prompt,
                    self.named(&f.provider),
                    f.response_type,
                    f.constrained,
                );
                // A reply that did not end on its own is labelled so: its curve stops where the
                // budget did.
                let name = if f.cut_by_budget {
                    format!("{name}, cut by its budget")
                } else {
                    name
                };
                (name, &f.sweep)
            })
            .collect();
        (!curves.is_empty()).then(|| {
            Chart::sweeps(
                "If each format's best reply were cut at every token",
                &curves,
            )
        })
    }
}

impl Compared {
    /// Provider `i`'s name, as a report row names it (none in a compare of one).
    fn provider_name(&self, i: usize) -> String {
        match self.providers.get(i) {
            Some((name, _)) if self.providers.len() > 1 => name.clone(),
            _ => String::new(),
        }
    }

    /// The result with each row and sweep named by its prompt and provider.
    pub fn report(&self, contenders: &[Contender]) -> Report {
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let p = &contenders[r.subject].subject.prompt;
                ReportRow {
                    prompt: p.id().into(),
                    provider: self.provider_name(r.provider),
                    response_type: p.file.response_type,
                    max_tokens: r.max_tokens,
                    constrained: r.constrained,
                    objects: r.out.report.objects.len(),
                    dropped: r.out.report.drop_counts(),
                    truncated: r.truncated(),
                    finish_reason: r.out.finish.reason,
                    completion_tokens: r.out.finish.usage.completion_tokens,
                    seconds: r.seconds,
                    history_id: r.run_id,
                }
            })
            .collect();
        let sweeps = self
            .sweeps
            .iter()
            .map(|f| {
                let (p, r) = (&contenders[f.subject].subject.prompt, &self.rows[f.row]);
                ReportSweep {
                    prompt: p.id().into(),
                    provider: self.provider_name(f.provider),
                    response_type: p.file.response_type,
                    max_tokens: r.max_tokens,
                    constrained: r.constrained,
                    cut_by_budget: f.cut_by_budget,
                    history_id: r.run_id,
                    completion_tokens: r.out.finish.usage.completion_tokens,
                    sweep: f.sweep.clone(),
                }
            })
            .collect();
        Report {
            model: self.model.clone(),
            providers: self
                .providers
                .iter()
                .filter(|_| self.providers.len() > 1)
                .map(|(provider, model)| ReportProvider {
                    provider: provider.clone(),
                    model: model.clone(),
                })
                .collect(),
            experiment: self.experiment,
            rows,
            sweeps,
        }
    }
}

impl crate::experiments::lifecycle::Reported for Report {
    fn figures(&self) -> kerf_store::Figures {
        kerf_store::Figures {
            rows: Some(self.rows.len() as u64),
            ..kerf_store::Figures::default()
        }
    }
}
