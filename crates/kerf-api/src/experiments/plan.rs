//! What a plan will cost, known before its first request, and the limits every plan is held
//! to. A plan is checked whole — its size counted, its limits applied, its matrix known to fit
//! in memory — before anything is stored or sent, so a refused plan leaves nothing behind.

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use super::ExperimentKind;
use crate::error::{ApiError, Code, Result};
use crate::runs::Chosen;

/// Requests in flight at once, at most (`--concurrency`): more than any provider's rate limits
/// allow, and every one holds a connection and a reply in memory.
pub const MAX_CONCURRENCY: usize = 256;
/// Runs of each cell, at most (`--repeat`): past a hundred, the spread of a figure no longer
/// narrows in a way anyone reads.
pub const MAX_REPEAT: u32 = 100;
/// Requests a plan may send without being told how many it may (`--allow-requests N`, `--yes`,
/// or the window's confirmation).
pub const CONFIRM_ABOVE: u64 = 2_000;
/// Cells one plan may hold: each is a row in memory and in the history, and a plan this large
/// is a mistake far more often than an intent.
pub const MAX_CELLS: u64 = 1_000_000;
/// What a request costs by batch, as a share of its online price: half, for input and output
/// alike, at all three providers.
pub const BATCH_SHARE: f64 = 0.5;
/// Tokens a chat template adds around a request's text, allowed for in the bound (role markers,
/// turn separators).
pub const TEMPLATE_TOKENS: u64 = 32;

/// A plan's size, announced before its first request: `kerf eval`, `compare` and `test` print
/// it (and `--json` holds it), the window shows it before it asks to start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, TS)]
#[ts(rename = "PlanSize")]
pub struct Size {
    pub kind: ExperimentKind,
    /// Cells the plan runs now (a resume: those still to run).
    pub cells: u64,
    /// Requests it may send, at most (repairs included where the plan repairs).
    pub requests: u64,
    /// Input tokens it may send, at most: the rendered prompts' bytes (no tokenizer makes more
    /// tokens than bytes) plus a chat template's few tokens per request.
    pub input_tokens_max: u64,
    /// Output tokens it may be billed for, at most: every request's `max_tokens`.
    pub output_tokens_max: u64,
    /// Dollars it may cost, at most, from the price table (`None`: no price is known, or the
    /// local engine).
    pub cost_max_usd: Option<f64>,
    /// The requests go to a provider that may refuse them (a cloud API or a server): a refused
    /// request is retried, and retries are not counted above; the plan stops after
    /// `KERF_MAX_REFUSALS` refusals in a row.
    #[serde(default)]
    pub retried: bool,
    /// The provider this part of a plan goes to (a plan of several providers counts each in
    /// [`Size::providers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[ts(optional)]
    pub provider: Option<String>,
    /// With several providers: each one's part, in the plan's order (the fields above are
    /// their sums; the cost is the sum of the parts whose price is known).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[ts(as = "Option<Vec<Size>>", optional)]
    pub providers: Vec<Size>,
    /// This part goes to its provider's batch API (or a batch file), at the batch price: half
    /// the online price, which [`cost_max_usd`](Self::cost_max_usd) is then.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[ts(as = "Option<bool>", optional)]
    pub by_batch: bool,
}

impl Size {
    pub fn new(kind: ExperimentKind) -> Self {
        Size {
            kind,
            cells: 0,
            requests: 0,
            input_tokens_max: 0,
            output_tokens_max: 0,
            cost_max_usd: None,
            retried: false,
            provider: None,
            providers: Vec::new(),
            by_batch: false,
        }
    }

    /// This plan with the parts `batched` marks (by provider, in order) going by batch, each
    /// at half its online price.
    pub fn batched(mut self, batched: &[bool]) -> Size {
        let mark = |mut part: Size, by_batch: bool| {
            if by_batch {
                part.by_batch = true;
                part.cost_max_usd = part.cost_max_usd.map(|c| c * BATCH_SHARE);
            }
            part
        };
        if self.providers.is_empty() {
            return mark(self, batched.first().copied().unwrap_or(false));
        }
        let kind = self.kind;
        let parts = std::mem::take(&mut self.providers)
            .into_iter()
            .enumerate()
            .map(|(i, p)| mark(p, batched.get(i).copied().unwrap_or(false)))
            .collect();
        Size::merge(kind, parts)
    }

    /// A plan over `providers` from each one's part, in order: each priced by its provider
    /// ([`Size::priced`]), then [`Size::merge`]d.
    pub fn of_parts(kind: ExperimentKind, parts: Vec<Size>, providers: &[Chosen]) -> Result<Size> {
        let parts = parts
            .into_iter()
            .zip(providers)
            .map(|(size, p)| size.priced(p))
            .collect::<Result<Vec<_>>>()?;
        Ok(Size::merge(kind, parts))
    }

    /// A plan over several providers from each one's part (each [`Size::priced`] and named):
    /// one part is the plan itself.
    pub fn merge(kind: ExperimentKind, mut parts: Vec<Size>) -> Size {
        if parts.len() == 1 {
            return parts.remove(0);
        }
        let mut all = Size::new(kind);
        for p in &parts {
            all.cells = all.cells.saturating_add(p.cells);
            all.requests = all.requests.saturating_add(p.requests);
            all.input_tokens_max = all.input_tokens_max.saturating_add(p.input_tokens_max);
            all.output_tokens_max = all.output_tokens_max.saturating_add(p.output_tokens_max);
            if let Some(c) = p.cost_max_usd {
                all.cost_max_usd = Some(all.cost_max_usd.unwrap_or(0.0) + c);
            }
            all.retried |= p.retried;
        }
        all.providers = parts;
        all
    }

    /// Count `cells` cells, each a first request of `input_bytes` rendered bytes at a budget of
    /// `max_tokens`, and up to `repairs` more requests each within `max_run_tokens` (the run's
    /// own ceiling, which a repair is never sent past).
    pub fn add(
        &mut self,
        cells: u64,
        input_bytes: u64,
        max_tokens: u32,
        repairs: u32,
        max_run_tokens: u64,
    ) {
        let repairs = u64::from(repairs);
        self.cells = self.cells.saturating_add(cells);
        self.requests = self
            .requests
            .saturating_add(cells.saturating_mul(1 + repairs));
        let input = input_bytes.saturating_add(TEMPLATE_TOKENS);
        let repaired = if repairs > 0 { max_run_tokens } else { 0 };
        self.input_tokens_max = self
            .input_tokens_max
            .saturating_add(cells.saturating_mul(input.saturating_add(repaired)));
        self.output_tokens_max = self.output_tokens_max.saturating_add(
            cells.saturating_mul(u64::from(max_tokens).saturating_mul(1 + repairs)),
        );
    }

    /// The cost bound from `provider`'s price (none for the local engine or an unpriced model),
    /// and whether its requests may be refused and retried.
    pub fn priced(mut self, provider: &Chosen) -> Result<Self> {
        self.provider = Some(provider.name());
        self.retried = matches!(provider, Chosen::Cloud(_));
        self.cost_max_usd = provider.price()?.map(|p| {
            (self.input_tokens_max as f64 * p.input + self.output_tokens_max as f64 * p.output)
                / 1e6
        });
        Ok(self)
    }

    /// One line for people: `12 cells · 12 requests · ≤ 5,321 input and ≤ 6,144 output tokens ·
    /// ≤ $0.0123`; with several providers, then each one's requests and cost (`— openai: 6
    /// request(s), ≤ $0.0100; local: 6 request(s), free`).
    pub fn line(&self) -> String {
        let mut s = self.totals();
        if !self.providers.is_empty() {
            let parts: Vec<String> = self
                .providers
                .iter()
                .map(|p| {
                    format!(
                        "{}: {} request(s){}, {}",
                        p.provider.as_deref().unwrap_or("?"),
                        thousands(p.requests),
                        if p.by_batch { " by batch" } else { "" },
                        match (p.cost_max_usd, p.retried) {
                            (Some(c), _) => format!("≤ ${c:.4}"),
                            (None, true) => "no price known".into(),
                            (None, false) => "free".into(),
                        }
                    )
                })
                .collect();
            s.push_str(&format!(" — {}", parts.join("; ")));
        }
        s
    }

    fn totals(&self) -> String {
        let mut s = format!(
            "{} cell(s) · {} request(s) at most · ≤ {} input and ≤ {} output tokens",
            thousands(self.cells),
            thousands(self.requests),
            thousands(self.input_tokens_max),
            thousands(self.output_tokens_max)
        );
        if let Some(c) = self.cost_max_usd {
            s.push_str(&format!(" · ≤ ${c:.4}"));
        }
        if self.by_batch {
            s.push_str(" · by batch, at half the online price");
        }
        // A refused request is retried and counted by no bound above; a provider that refuses
        // KERF_MAX_REFUSALS requests in a row stops the plan.
        if self.retried && self.requests > 0 {
            s.push_str(&format!(
                " · retries not counted (stops after {} refusals in a row)",
                kerf_llm::ratelimit::max_refusals()
            ));
        }
        s
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What the person starting a plan allowed: how wide, how many requests.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Allowance {
    /// Requests a plan over [`CONFIRM_ABOVE`] may send (`--allow-requests N`).
    pub max_requests: Option<u64>,
    /// Any number of requests (`--yes`, or the window's confirmation of the count shown).
    pub yes: bool,
}

/// `--concurrency` within 1..=[`MAX_CONCURRENCY`].
pub fn check_concurrency(concurrency: usize) -> Result<()> {
    if concurrency == 0 || concurrency > MAX_CONCURRENCY {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "--concurrency {concurrency}: give 1 to {MAX_CONCURRENCY} requests in flight at once"
            ),
        ));
    }
    Ok(())
}

/// One or more providers, each named once.
pub fn check_providers(providers: &[Chosen]) -> Result<()> {
    if providers.is_empty() {
        return Err(ApiError::new(Code::Usage, "give one or more providers"));
    }
    let mut names = std::collections::BTreeSet::new();
    for p in providers {
        if !names.insert(p.name()) {
            return Err(ApiError::new(
                Code::Usage,
                format!("provider `{}` is given twice", p.name()),
            ));
        }
    }
    Ok(())
}

/// `--repeat` within 1..=[`MAX_REPEAT`].
pub fn check_repeat(repeat: u32) -> Result<()> {
    if repeat == 0 || repeat > MAX_REPEAT {
        return Err(ApiError::new(
            Code::Usage,
            format!("--repeat {repeat}: give 1 to {MAX_REPEAT} runs of each cell"),
        ));
    }
    Ok(())
}

/// Cells a plan would hold, refused past [`MAX_CELLS`] before any is made.
pub fn check_cells(cells: u64) -> Result<()> {
    if cells > MAX_CELLS {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "the plan has {} cells, more than the {} one experiment may hold: use fewer rows (--limit), prompts, budgets or repeats",
                thousands(cells),
                thousands(MAX_CELLS)
            ),
        ));
    }
    Ok(())
}

/// A plan's requests against what was allowed: over [`CONFIRM_ABOVE`] it needs `--yes` or a
/// `--allow-requests` of at least its count.
pub fn check_allowed(size: &Size, allowed: Allowance) -> Result<()> {
    if let Some(max) = allowed.max_requests
        && size.requests > max
    {
        return Err(ApiError::new(
            Code::Usage,
            format!(
                "the plan may send {} requests, more than --allow-requests {} ({})",
                thousands(size.requests),
                thousands(max),
                size.line()
            ),
        ));
    }
    if size.requests > CONFIRM_ABOVE && !allowed.yes && allowed.max_requests.is_none() {
        return Err(ApiError {
            details: serde_json::to_value(size).ok(),
            ..ApiError::new(
                Code::PlanTooLarge,
                format!(
                    "the plan may send {} requests ({}): over {} needs --allow-requests {} (or --yes) to start",
                    thousands(size.requests),
                    size.line(),
                    thousands(CONFIRM_ABOVE),
                    size.requests
                ),
            )
        });
    }
    Ok(())
}
