//! A provider that plays a transcript: for testing everything above the provider contract (the
//! repair loop, the streaming relay, cancel, recording, reruns) in-process and in milliseconds.
//! The real model and the loopback servers stay the end-to-end layer; this one tests what Kerf
//! does with a reply, not how a reply is obtained.
//!
//! Each [`Provider::run`] plays the next [`Reply`] in order: its pieces (text, warnings, pauses),
//! then its finish. Every request is kept, so a test can assert what was sent (a repair's
//! growing conversation, the budget, the sampling).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use crate::{
    CancelToken, Constraint, Error, Event, Finish, FinishReason, Provider, Request, RunFuture,
    Timings, Usage,
};

/// One part of a reply as it arrives.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Warning(String),
    /// Time passing between pieces (a slow server; room for a cancel).
    Pause(Duration),
}

/// What one request gets back.
#[derive(Debug, Clone)]
pub struct Reply {
    pub pieces: Vec<Piece>,
    pub reason: FinishReason,
    pub usage: Usage,
    /// For `FinishReason::Error`/`Interrupted`: what broke after text had started.
    pub error: Option<String>,
    /// Fail before any text, with this error (an HTTP 429, an unreachable host).
    pub fail: Option<fn() -> Error>,
}

impl Reply {
    /// `text` in pieces of at most `chunk` characters, ended by the model (`stop`), with usage
    /// counted as a character per token.
    pub fn text(text: &str, chunk: usize) -> Reply {
        let chars: Vec<char> = text.chars().collect();
        let pieces = chars
            .chunks(chunk.max(1))
            .map(|c| Piece::Text(c.iter().collect()))
            .collect();
        Reply {
            pieces,
            reason: FinishReason::Stop,
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: u32::try_from(chars.len()).unwrap_or(u32::MAX),
                reasoning_tokens: None,
            },
            error: None,
            fail: None,
        }
    }

    /// The same reply, ended for `reason` instead.
    pub fn ending(self, reason: FinishReason) -> Reply {
        Reply { reason, ..self }
    }

    /// A pause of `pause` before each piece.
    pub fn paced(self, pause: Duration) -> Reply {
        let pieces = self
            .pieces
            .into_iter()
            .flat_map(|p| [Piece::Pause(pause), p])
            .collect();
        Reply { pieces, ..self }
    }

    /// No text: the request fails with `error`.
    pub fn failing(error: fn() -> Error) -> Reply {
        Reply {
            pieces: Vec::new(),
            reason: FinishReason::Error,
            usage: Usage::default(),
            error: None,
            fail: Some(error),
        }
    }
}

/// The provider: its replies in order, and the requests it was sent.
pub struct Scripted {
    name: String,
    model: String,
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Request>>,
    /// Whether it claims to honour output constraints.
    pub constrains: bool,
}

impl Scripted {
    pub fn new(replies: impl IntoIterator<Item = Reply>) -> Self {
        Scripted {
            name: "scripted".into(),
            model: "transcript".into(),
            replies: Mutex::new(replies.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            constrains: false,
        }
    }

    /// Every request sent so far, oldest first.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Replies not played yet.
    pub fn left(&self) -> usize {
        self.replies.lock().map(|r| r.len()).unwrap_or(0)
    }
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        &self.name
    }

    fn model(&self) -> String {
        self.model.clone()
    }

    fn supports(&self, _constraint: &Constraint) -> bool {
        self.constrains
    }

    fn run<'a>(
        &'a self,
        request: &'a Request,
        cancel: &'a CancelToken,
        on_event: &'a mut dyn FnMut(Event<'_>),
    ) -> RunFuture<'a> {
        Box::pin(async move {
            if let Ok(mut r) = self.requests.lock() {
                r.push(request.clone());
            }
            let reply = self
                .replies
                .lock()
                .ok()
                .and_then(|mut r| r.pop_front())
                .ok_or_else(|| {
                    Error::Request("the transcript has no reply left for this request".into())
                })?;
            if let Some(fail) = reply.fail {
                return Err(fail());
            }
            let started = std::time::Instant::now();
            let mut first: Option<f64> = None;
            let mut reason = reply.reason;
            for piece in &reply.pieces {
                if cancel.is_cancelled() {
                    reason = FinishReason::Cancelled;
                    break;
                }
                match piece {
                    Piece::Text(t) => {
                        first.get_or_insert_with(|| started.elapsed().as_secs_f64());
                        on_event(Event::Text(t));
                    }
                    Piece::Warning(w) => on_event(Event::Warning(w)),
                    // A pause as a network gap would be: other runs go on meanwhile, and a
                    // cancellation ends it.
                    Piece::Pause(d) => {
                        tokio::select! {
                            () = tokio::time::sleep(*d) => {}
                            () = cancel.cancelled() => {}
                        }
                    }
                }
            }
            let total = started.elapsed().as_secs_f64();
            Ok(Finish {
                reason,
                usage: reply.usage,
                timings: Timings {
                    first_token_seconds: first,
                    total_seconds: total,
                    ..Timings::default()
                },
                error: reply.error.clone(),
                details: crate::RunDetails::Other {
                    provider: "scripted".into(),
                },
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn it_plays_replies_in_order_and_keeps_the_requests() {
        let p = Scripted::new([
            Reply::text("héllo", 2),
            Reply::failing(|| Error::Http {
                status: 429,
                message: "slow down".into(),
            }),
        ]);
        let mut got = String::new();
        let f = p
            .run_blocking(&Request::new(None, "a"), &CancelToken::new(), &mut |e| {
                if let Event::Text(t) = e {
                    got.push_str(t);
                }
            })
            .unwrap();
        assert_eq!((got.as_str(), f.reason), ("héllo", FinishReason::Stop));
        let e = p
            .run_blocking(&Request::new(None, "b"), &CancelToken::new(), &mut |_| {})
            .unwrap_err();
        assert_eq!(e.code(), "http");
        assert!(
            p.run_blocking(&Request::new(None, "c"), &CancelToken::new(), &mut |_| {})
                .is_err()
        );
        let sent: Vec<String> = p
            .requests()
            .iter()
            .map(|r| r.messages.last().unwrap().content.clone())
            .collect();
        assert_eq!(sent, ["a", "b", "c"]);
    }

    #[test]
    fn a_cancel_stops_it_between_pieces() {
        let p = Scripted::new([Reply::text("abcdef", 1)]);
        let cancel = CancelToken::new();
        let mut got = String::new();
        let f = p
            .run_blocking(&Request::new(None, "a"), &cancel, &mut |e| {
                if let Event::Text(t) = e {
                    got.push_str(t);
                    if got.len() == 3 {
                        cancel.cancel();
                    }
                }
            })
            .unwrap();
        assert_eq!((got.as_str(), f.reason), ("abc", FinishReason::Cancelled));
    }
}
