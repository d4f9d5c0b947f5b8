//! Per-provider rate limits: requests and tokens per minute, from the provider's configuration
//! or, where none is configured, learned from the limits the API itself announces in its reply
//! headers (OpenAI's `x-ratelimit-limit-*`, Anthropic's `anthropic-ratelimit-*-limit`). Every
//! request of a provider waits for its turn here before it is sent, so many runs in flight (an
//! evaluation's 16–64) stay under the account's limits instead of buying 429s and retries.
//!
//! The accounting is the `governor` crate's GCRA: a limit of N per minute allows a burst of N
//! and refills continuously. A request counts one request and its token estimate (the prompt's
//! bytes / 4 plus its whole budget: what the provider counts against the limit up front).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use governor::clock::Clock;
use governor::{DefaultDirectRateLimiter, Quota};
use serde::{Deserialize, Serialize};

use crate::CancelToken;

/// Requests and tokens per minute; a limit left out is not enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_minute: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_minute: Option<u32>,
}

impl RateLimits {
    pub fn is_empty(&self) -> bool {
        self.requests_per_minute.is_none() && self.tokens_per_minute.is_none()
    }

    /// The limits a reply's headers announce (names lower-case), if any.
    pub fn from_headers(headers: &[(String, String)]) -> RateLimits {
        let find = |names: &[&str]| {
            names.iter().find_map(|n| {
                headers
                    .iter()
                    .find(|(k, _)| k == n)
                    .and_then(|(_, v)| v.trim().parse::<u32>().ok())
                    .filter(|&v| v > 0)
            })
        };
        RateLimits {
            requests_per_minute: find(&[
                "x-ratelimit-limit-requests",
                "anthropic-ratelimit-requests-limit",
            ]),
            tokens_per_minute: find(&[
                "x-ratelimit-limit-tokens",
                "anthropic-ratelimit-tokens-limit",
                "anthropic-ratelimit-input-tokens-limit",
            ]),
        }
    }
}

/// Where the limits in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// None known: requests go out as fast as they are made.
    None,
    Configured,
    /// Announced by the API in its reply headers.
    Learned,
}

struct State {
    limits: RateLimits,
    source: LimitSource,
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<DefaultDirectRateLimiter>,
}

impl State {
    fn new(limits: RateLimits, source: LimitSource) -> State {
        let gcra = |n: Option<u32>| {
            n.and_then(NonZeroU32::new)
                .map(|n| governor::RateLimiter::direct(Quota::per_minute(n)))
        };
        State {
            limits,
            source,
            requests: gcra(limits.requests_per_minute),
            tokens: gcra(limits.tokens_per_minute),
        }
    }
}

/// One provider's limiter, shared by every run of it in this process.
pub struct Limiter {
    state: Mutex<State>,
    /// Refusals (429, 503, 529) since the provider last answered, over every run of it: past
    /// [`max_refusals`] no more requests are sent (a server that refuses everything would
    /// otherwise be retried for hours: 2,000 cells at `Retry-After: 60`, about 25).
    refusals: AtomicU32,
    /// The last refusal, for the error that stops sending.
    last_refusal: Mutex<String>,
    /// How many requests may be in flight when the provider's concurrency is `auto`.
    window: Window,
}

/// An adaptive concurrency limit (additive increase, multiplicative decrease, as TCP's
/// congestion window): it first doubles each round (slow start) until the provider refuses or
/// the latency to the first text rises a quarter over the best seen; then it grows by one
/// request per round of answers while that latency holds (within twice the best seen), and
/// halves when the provider says it is
/// over capacity (429, 503, 529, a refused connection), at most once per round (one recent
/// latency) so one burst of refusals halves it once. Near the number that was refused last it
/// grows a tenth as fast, so a small capacity is probed rarely rather than refused every few
/// rounds. A user need not know how many servers stand behind a URL: the limit finds what the
/// provider takes.
pub struct Window {
    state: Mutex<WindowState>,
}

struct WindowState {
    /// The limit, fractional: each answer adds 1/limit, a round adds one.
    limit: f64,
    /// The lowest latency seen, and a moving average of recent ones (seconds).
    best: Option<f64>,
    recent: Option<f64>,
    /// When it last halved, and the number that was refused then.
    cut_at: Option<std::time::Instant>,
    refused_at: Option<f64>,
    /// Times it halved, and answers counted.
    cuts: u64,
    answers: u64,
    /// Doubling each round (TCP's slow start) until the first sign of a limit: a refusal, or
    /// the latency rising past a quarter over the best.
    slow_start: bool,
}

impl Window {
    /// Requests in flight to start with: as many as the fixed default.
    pub const START: f64 = 4.0;
    /// The shortest time between two halvings, whatever the latency.
    const COOL_DOWN: Duration = Duration::from_millis(50);

    fn new() -> Window {
        Window {
            state: Mutex::new(WindowState {
                limit: Self::START,
                best: None,
                recent: None,
                cut_at: None,
                refused_at: None,
                cuts: 0,
                answers: 0,
                slow_start: true,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, WindowState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests that may be in flight now, within 1..=`ceiling`.
    pub fn limit(&self, ceiling: usize) -> usize {
        let mut s = self.state();
        s.limit = s.limit.min(ceiling.max(1) as f64);
        (s.limit.floor() as usize).clamp(1, ceiling.max(1))
    }

    /// A request was answered, its first text `latency` after it was sent (the end, for a reply
    /// with no text).
    pub fn answered(&self, latency: Duration) {
        let mut s = self.state();
        let l = latency.as_secs_f64();
        s.answers += 1;
        s.best = Some(s.best.map_or(l, |b| b.min(l)));
        s.recent = Some(s.recent.map_or(l, |r| 0.8 * r + 0.2 * l));
        let within = |factor: f64| matches!((s.best, s.recent), (Some(b), Some(r)) if r <= factor * b + 0.005);
        let (holds, flat) = (within(2.0), within(1.25));
        if s.slow_start && !flat {
            s.slow_start = false;
        }
        if s.slow_start {
            // One more per answer: twice as many each round.
            s.limit += 1.0;
        } else if holds {
            let near = s.refused_at.is_some_and(|r| s.limit + 1.0 >= r);
            let step = if near { 0.1 } else { 1.0 };
            s.limit += step / s.limit.max(1.0);
        }
    }

    /// The provider said it is over capacity.
    pub fn overloaded(&self) {
        let mut s = self.state();
        let now = std::time::Instant::now();
        // A round: the refusals of requests already in flight when it halved are that same
        // overload, not a new one.
        let round = Duration::from_secs_f64(s.recent.unwrap_or(0.0)).max(Self::COOL_DOWN);
        if s.cut_at.is_some_and(|at| now.duration_since(at) < round) {
            return;
        }
        s.cut_at = Some(now);
        s.cuts += 1;
        s.slow_start = false;
        s.refused_at = Some(s.limit.floor().max(1.0));
        s.limit = (s.limit / 2.0).max(1.0);
        // What the latency was before the overload is no guide to what it is now.
        s.recent = s.best;
    }

    /// Times it halved so far.
    pub fn cuts(&self) -> u64 {
        self.state().cuts
    }
}

/// Refusals in a row after which a provider gets no more requests in this process:
/// `KERF_MAX_REFUSALS` (default 20; at least 1).
pub fn max_refusals() -> u32 {
    std::env::var("KERF_MAX_REFUSALS")
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(20)
        .max(1)
}

impl Limiter {
    fn new(configured: RateLimits) -> Limiter {
        let source = if configured.is_empty() {
            LimitSource::None
        } else {
            LimitSource::Configured
        };
        Limiter {
            state: Mutex::new(State::new(configured, source)),
            refusals: AtomicU32::new(0),
            last_refusal: Mutex::new(String::new()),
            window: Window::new(),
        }
    }

    /// The provider's adaptive concurrency limit.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// The provider refused a request (`why`: the status and message).
    pub fn refused(&self, why: &str) {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        *self.last_refusal.lock().unwrap_or_else(|e| e.into_inner()) = why.to_string();
    }

    /// The provider answered a request: the count of refusals starts over.
    pub fn answered(&self) {
        self.refusals.store(0, Ordering::Relaxed);
    }

    /// The error that stops sending to provider `name`, once it has refused
    /// [`max_refusals`] requests in a row.
    pub fn refusing(&self, name: &str) -> Option<crate::Error> {
        let refusals = self.refusals.load(Ordering::Relaxed);
        (refusals >= max_refusals()).then(|| crate::Error::Refused {
            provider: name.to_string(),
            refusals,
            last: self
                .last_refusal
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The limits in force and where they came from.
    pub fn limits(&self) -> (RateLimits, LimitSource) {
        let s = self.state();
        (s.limits, s.source)
    }

    /// Take what a reply's headers announce, unless limits are configured (the user's word
    /// wins: an account may share its limit with other tools).
    pub fn learn(&self, headers: &[(String, String)]) {
        let announced = RateLimits::from_headers(headers);
        let mut s = self.state();
        if announced.is_empty() || s.source == LimitSource::Configured || s.limits == announced {
            return;
        }
        *s = State::new(announced, LimitSource::Learned);
    }

    /// Take one request slot, or say how long until there is one.
    fn take_request(&self) -> Option<Duration> {
        let s = self.state();
        let r = s.requests.as_ref()?;
        r.check()
            .err()
            .map(|not_yet| not_yet.wait_time_from(r.clock().now()))
    }

    /// Take `tokens` of the minute's allowance, or say how long until they fit.
    fn take_tokens(&self, tokens: u32) -> Option<Duration> {
        let s = self.state();
        let t = s.tokens.as_ref()?;
        // A request larger than the whole minute's allowance can never fit: it takes the whole
        // allowance (the API may still refuse it; that is its answer to give).
        let cap = s.limits.tokens_per_minute.unwrap_or(u32::MAX).max(1);
        let n = NonZeroU32::new(tokens.clamp(1, cap)).unwrap_or(NonZeroU32::MIN);
        match t.check_n(n) {
            Ok(Err(not_yet)) => Some(not_yet.wait_time_from(t.clock().now())),
            _ => None,
        }
    }

    /// Wait for the turn of one request of about `tokens` tokens: first a request slot, then
    /// the tokens. How long it waited, or `None` when cancelled while waiting.
    pub async fn admit(&self, tokens: u32, cancel: &CancelToken) -> Option<Duration> {
        let start = tokio::time::Instant::now();
        let mut have_slot = false;
        loop {
            let wait = if have_slot {
                self.take_tokens(tokens)
            } else {
                self.take_request()
            };
            match wait {
                None if have_slot => return Some(start.elapsed()),
                None => have_slot = true,
                Some(wait) => tokio::select! {
                    biased;
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {}
                },
            }
        }
    }
}

/// The process's limiter for the provider named `name` at `base_url`, with `configured` limits
/// (a changed configuration replaces what was in force).
pub fn for_provider(name: &str, base_url: &str, configured: RateLimits) -> Arc<Limiter> {
    /// Keyed by (name, base URL).
    type Registry = HashMap<(String, String), Arc<Limiter>>;
    static ALL: OnceLock<Mutex<Registry>> = OnceLock::new();
    let mut all = ALL
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let key = (name.to_string(), base_url.to_string());
    if let Some(l) = all.get(&key) {
        let (limits, source) = l.limits();
        let stale = match source {
            LimitSource::Configured => limits != configured,
            LimitSource::None | LimitSource::Learned => !configured.is_empty(),
        };
        if !stale {
            return l.clone();
        }
    }
    let l = Arc::new(Limiter::new(configured));
    all.insert(key, l.clone());
    l
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn limits_are_read_from_either_providers_headers() {
        let openai = h(&[
            ("x-ratelimit-limit-requests", "500"),
            ("x-ratelimit-limit-tokens", "30000"),
            ("x-ratelimit-remaining-requests", "499"),
        ]);
        assert_eq!(
            RateLimits::from_headers(&openai),
            RateLimits {
                requests_per_minute: Some(500),
                tokens_per_minute: Some(30000)
            }
        );
        let anthropic = h(&[
            ("anthropic-ratelimit-requests-limit", "50"),
            ("anthropic-ratelimit-input-tokens-limit", "40000"),
        ]);
        assert_eq!(
            RateLimits::from_headers(&anthropic),
            RateLimits {
                requests_per_minute: Some(50),
                tokens_per_minute: Some(40000)
            }
        );
        assert!(RateLimits::from_headers(&h(&[("x-ratelimit-limit-requests", "x")])).is_empty());
    }

    #[test]
    fn a_burst_past_the_limit_waits_for_the_refill() {
        // 60 a minute: a burst of 60, then one a second.
        let l = Limiter::new(RateLimits {
            requests_per_minute: Some(60),
            tokens_per_minute: None,
        });
        let start = std::time::Instant::now();
        for i in 0..60 {
            assert_eq!(l.take_request(), None, "request {i} is within the burst");
        }
        // Past the burst, one more a second since the first: however long the burst took (a
        // busy machine may stall this thread for a second or more), the slots taken and the
        // wait for the next add up to that, never more.
        let mut refilled = 0u32;
        let wait = loop {
            match l.take_request() {
                Some(wait) => break wait,
                None => refilled += 1,
            }
        };
        let since = start.elapsed();
        // The clocks (governor's and std's) may disagree by a little.
        let slack = Duration::from_millis(10);
        assert!(
            wait <= Duration::from_secs(1)
                && wait + since + slack >= Duration::from_secs(u64::from(refilled) + 1)
                && Duration::from_secs(u64::from(refilled)) <= since + slack,
            "waits {wait:?} after {refilled} more in {since:?}"
        );
        // Without limits nothing waits.
        let free = Limiter::new(RateLimits::default());
        assert!(
            (0..10_000)
                .all(|_| free.take_request().is_none() && free.take_tokens(1 << 20).is_none())
        );
    }

    #[test]
    fn tokens_are_limited_too_and_a_wait_can_be_cancelled() {
        crate::runtime::block_on(async {
            let l = Limiter::new(RateLimits {
                requests_per_minute: None,
                tokens_per_minute: Some(1000),
            });
            let cancel = CancelToken::new();
            assert!(l.admit(900, &cancel).await.is_some());
            // 900 of 1000 spent: 500 more is a wait of ~24 s, which a cancel ends at once.
            let c = cancel.clone();
            let t = std::time::Instant::now();
            let (admitted, ()) = tokio::join!(l.admit(500, &cancel), async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                c.cancel();
            });
            assert_eq!(admitted, None);
            // Ended by the cancel, not by the refill (~24 s away); a generous bound.
            assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
        });
    }

    #[test]
    fn configured_limits_win_over_announced_ones() {
        let l = Limiter::new(RateLimits {
            requests_per_minute: Some(10),
            tokens_per_minute: None,
        });
        l.learn(&h(&[("x-ratelimit-limit-requests", "500")]));
        assert_eq!(l.limits().0.requests_per_minute, Some(10));
        let free = Limiter::new(RateLimits::default());
        free.learn(&h(&[("x-ratelimit-limit-requests", "500")]));
        assert_eq!(
            free.limits(),
            (
                RateLimits {
                    requests_per_minute: Some(500),
                    tokens_per_minute: None
                },
                LimitSource::Learned
            )
        );
    }

    /// The window doubles each round at first (slow start), until the latency rises; then it
    /// grows a request per round while the latency holds, not while it climbs; halves once for
    /// a burst of refusals; and grows a tenth as fast near the number refused.
    #[test]
    fn the_window_grows_while_latency_holds_and_halves_on_overload() {
        let w = Window::new();
        let ms = Duration::from_millis;
        assert_eq!(w.limit(64), 4);
        // Slow start: a round of 4 answers at a steady latency doubles it, and the next round
        // of 8 doubles it again.
        for _ in 0..4 {
            w.answered(ms(20));
        }
        assert_eq!(w.limit(64), 8);
        for _ in 0..8 {
            w.answered(ms(20));
        }
        assert_eq!(w.limit(64), 16);
        // Within the ceiling, always.
        assert_eq!(w.limit(3), 3);
        // The latency rising ends the slow start: a request per round from then on.
        let w = Window::new();
        for _ in 0..4 {
            w.answered(ms(20));
        }
        w.answered(ms(80)); // lifts the recent latency past a quarter over the best: no more doubling
        let at = w.limit(64);
        assert_eq!(at, 8);
        for _ in 0..at {
            w.answered(ms(30));
        }
        assert_eq!(w.limit(64), at + 1, "one more after a round at {at}");
        let grown = w.limit(64);
        // Latency far past the best: no more growth.
        for _ in 0..40 {
            w.answered(ms(400));
        }
        let held = w.limit(64);
        assert!(held <= grown + 2, "{held} after {grown}");
        // A burst of refusals halves it once.
        w.overloaded();
        w.overloaded();
        w.overloaded();
        assert_eq!(w.limit(64), (held / 2).max(1));
        assert_eq!(w.cuts(), 1);
        // Back near the refused number, growth is slow.
        let w = Window::new();
        w.overloaded();
        assert_eq!(w.limit(64), 2);
        for _ in 0..4 {
            w.answered(ms(20));
        }
        let near = w.limit(64);
        assert_eq!(near, 3, "grows back fast to just below the refused 4");
        for _ in 0..6 {
            w.answered(ms(20));
        }
        assert_eq!(w.limit(64), 3, "then a tenth as fast");
    }
}
