//! The run pipeline in-process, on a scripted provider (`kerf_llm::scripted`): the repair loop,
//! its ceilings, recording as a run streams, and a cancel that keeps what arrived — in
//! milliseconds. The real model and the loopback servers test the same paths end to end.

use std::time::Duration;

use kerf_api::runs::{Chosen, PromptSource, Rendering, RunEvent, RunJob, RunParams, RunSettings};
use kerf_core::Prompt;
use kerf_llm::runtime::block_on;
use kerf_llm::scripted::{Piece, Reply, Scripted};
use kerf_llm::{CancelToken, FinishReason, Role};
use kerf_store::Store;
use serde_json::{Map, Value, json};

/// A JSONL prompt whose objects need a `term`, repairing up to `attempts` times.
fn terms_prompt(attempts: u32) -> (Prompt, PromptSource) {
    let text = json!({
        "prompt": "List the terms in: {{ text }}",
        "response-type": "jsonl",
        "schema": {"type": "object", "properties": {"term": {"type": "string"}},
                   "required": ["term"], "additionalProperties": false},
        "repair": {"max-attempts": attempts}
    })
    .to_string();
    let loaded = kerf_core::PromptFile::from_json_str(&text, "terms.json").unwrap();
    let prompt = Prompt::compile(loaded.file, "terms.json").unwrap();
    let source = PromptSource {
        name: "terms".into(),
        path: None,
        text,
    };
    (prompt, source)
}

fn rendering(prompt: &Prompt) -> Rendering {
    let mut vars = Map::new();
    vars.insert("text".into(), Value::String("Ada wrote programs.".into()));
    Rendering {
        rendered: prompt.render(&Map::new(), &vars).unwrap(),
        vars,
        terms: Map::new(),
    }
}

fn params(max_requests: u32) -> RunParams {
    RunParams {
        settings: RunSettings {
            provider: "scripted".into(),
            max_requests,
            ..RunSettings::default()
        },
        max_tokens: 200,
        constrain: false,
    }
}

/// Run `prompt` on `provider`, recording into `store` (and cancelling after that many pieces
/// of text); the events seen.
fn run(
    store: &Store,
    provider: &Chosen,
    prompt: &Prompt,
    source: &PromptSource,
    params: &RunParams,
    cancel_after: Option<usize>,
) -> (kerf_api::runs::RunResult, Vec<String>) {
    let cancel = CancelToken::new();
    let rendering = rendering(prompt);
    let job = RunJob::new(prompt, source, &rendering, provider, params);
    let mut seen = Vec::new();
    let result = block_on(kerf_api::runs::run(
        Some(store),
        &job,
        &cancel,
        &mut |e| match e {
            RunEvent::Text(t) => {
                seen.push(format!("text {t}"));
                if Some(seen.len()) == cancel_after {
                    cancel.cancel();
                }
            }
            RunEvent::Repair { attempt, max, .. } => seen.push(format!("repair {attempt}/{max}")),
            RunEvent::Warning(w) => seen.push(format!("warning {w}")),
        },
    ))
    .unwrap();
    (result, seen)
}

#[test]
fn a_repair_resends_the_conversation_and_its_answer_is_the_run() {
    let (prompt, source) = terms_prompt(3);
    let bad = "{\"name\": \"Ada\"}\n";
    let good = "{\"term\": \"Ada\"}\n{\"term\": \"programs\"}\n";
    let scripted = Scripted::new([Reply::text(bad, 4), Reply::text(good, 4)]);
    let provider = Chosen::Scripted(Box::new(scripted));
    let store = Store::in_memory().unwrap();
    let (result, seen) = run(&store, &provider, &prompt, &source, &params(10), None);
    assert_eq!(result.out.report.objects.len(), 2);
    assert_eq!(result.out.raw, good);
    assert_eq!(result.out.earlier.len(), 1);
    assert!(seen.contains(&"repair 2/3".to_string()), "{seen:?}");
    let Chosen::Scripted(p) = &provider else {
        unreachable!()
    };
    let sent = p.requests();
    assert_eq!(sent.len(), 2);
    // The repair carries the failed reply as the assistant's turn, then what was wrong.
    let roles: Vec<Role> = sent[1].messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::User]);
    assert_eq!(sent[1].messages[1].content, bad);
    assert!(
        sent[1].messages[2].content.contains("term"),
        "{}",
        sent[1].messages[2].content
    );
    // Recorded: the answer, and the failed reply before it.
    let rec = store.run(result.history_id.unwrap()).unwrap();
    assert_eq!(rec.raw, good);
    assert_eq!(rec.earlier.len(), 1);
    assert_eq!(rec.earlier[0]["raw"], bad);
}

#[test]
fn a_repair_loop_stops_at_the_runs_request_ceiling() {
    let (prompt, source) = terms_prompt(5);
    let bad = "{\"name\": \"Ada\"}\n";
    let scripted = Scripted::new((0..5).map(|_| Reply::text(bad, 8)));
    let provider = Chosen::Scripted(Box::new(scripted));
    let store = Store::in_memory().unwrap();
    let (result, _) = run(&store, &provider, &prompt, &source, &params(2), None);
    let Chosen::Scripted(p) = &provider else {
        unreachable!()
    };
    assert_eq!(
        p.requests().len(),
        2,
        "the prompt's 5 attempts passed the ceiling of 2"
    );
    assert_eq!(p.left(), 3);
    assert!(result.out.report.objects.is_empty());
}

#[test]
fn a_cancelled_run_keeps_and_records_what_arrived() {
    let (prompt, source) = terms_prompt(1);
    let reply = (0..50)
        .map(|i| format!("{{\"term\": \"t{i}\"}}\n"))
        .collect::<String>();
    let scripted = Scripted::new([Reply::text(&reply, 16).paced(Duration::from_millis(1))]);
    let provider = Chosen::Scripted(Box::new(scripted));
    let store = Store::in_memory().unwrap();
    let (result, seen) = run(&store, &provider, &prompt, &source, &params(1), Some(3));
    assert_eq!(result.out.finish.reason, FinishReason::Cancelled);
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(
        result.out.raw,
        reply[..48],
        "the text kept is what streamed"
    );
    // Three whole lines of 15 characters, and the start of the fourth, cut.
    assert_eq!(
        result.out.report.objects.len(),
        3,
        "{:?}",
        result.out.report
    );
    assert!(result.out.report.truncated);
    let rec = store.run(result.history_id.unwrap()).unwrap();
    assert_eq!(rec.raw, result.out.raw);
    assert_eq!(rec.summary.finish_reason, Some(FinishReason::Cancelled));
}

/// The window's relay: text and objects arrive coalesced (not one message per piece), each
/// object after the text that completes its line, and a repair starts the objects over.
#[test]
fn the_window_gets_objects_as_lines_complete_and_a_repair_starts_them_over() {
    use kerf_api::runs::wire::RunMessage;
    let (prompt, source) = terms_prompt(2);
    let bad = "{\"name\": \"Ada\"}\n";
    let good = (0..40)
        .map(|i| format!("{{\"term\": \"t{i}\"}}\n"))
        .collect::<String>();
    // The good reply comes in bursts of pieces sent back to back, each after a pause longer than
    // the relay's flush interval (33 ms). The first piece of every burst is sent with what was
    // held whatever the machine's load (so objects reach the window mid-stream, not all at the
    // end); within a burst pieces are held and sent together unless the machine stalls 33 ms
    // between every two of them. (Evenly paced pieces were coalesced only while each pause took
    // less than the interval: a busy machine could stretch every one.)
    let mut paced = Reply::text(&good, 7);
    let pieces = paced.pieces.len();
    assert_eq!(pieces, good.chars().count().div_ceil(7));
    const BURST: usize = 12;
    let bursts = pieces.div_ceil(BURST);
    paced.pieces = paced
        .pieces
        .chunks(BURST)
        .flat_map(|burst| {
            std::iter::once(Piece::Pause(Duration::from_millis(50))).chain(burst.iter().cloned())
        })
        .collect();
    let scripted = Scripted::new([Reply::text(bad, 5), paced]);
    let provider = Chosen::Scripted(Box::new(scripted));
    let store = Store::in_memory().unwrap();
    let rendering = rendering(&prompt);
    let params = params(10);
    let job = RunJob::new(&prompt, &source, &rendering, &provider, &params);
    let mut messages = Vec::new();
    let done = kerf_api::runs::relay_run(&job, Some(&store), &CancelToken::new(), &mut |m| {
        messages.push(m)
    })
    .unwrap();
    assert_eq!(done.objects.len(), 40);
    assert!(done.history_id.is_some());

    let repair = messages
        .iter()
        .position(|m| matches!(m, RunMessage::Repair { .. }))
        .expect("no repair message");
    let (before, after) = messages.split_at(repair);
    let text = |ms: &[RunMessage]| -> String {
        ms.iter()
            .filter_map(|m| match m {
                RunMessage::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(text(before), bad);
    assert_eq!(text(after), good);
    // The failed reply's drop reached the window; none of its objects did.
    assert!(before.iter().any(
        |m| matches!(m, RunMessage::Objects { objects, dropped } if objects.is_empty() && dropped.len() == 1)
    ));
    // After the repair: every object once, in order, each after the text holding its line.
    let mut seen_text = String::new();
    let mut terms: Vec<String> = Vec::new();
    for m in after {
        match m {
            RunMessage::Text { text } => seen_text.push_str(text),
            RunMessage::Objects { objects, .. } => {
                for o in objects {
                    let term = o["term"].as_str().unwrap().to_string();
                    // The object closes at its `}`: the parser commits it there, and the relay
                    // may flush before the line's newline arrives (a load-dependent timer).
                    assert!(
                        seen_text.contains(&format!("\"{term}\"}}")),
                        "{term} arrived before its line"
                    );
                    terms.push(term);
                }
            }
            _ => {}
        }
    }
    let expected: Vec<String> = (0..40).map(|i| format!("t{i}")).collect();
    assert_eq!(terms, expected);
    let text_messages = after
        .iter()
        .filter(|m| matches!(m, RunMessage::Text { .. }))
        .count();
    assert!(
        text_messages < pieces,
        "{text_messages} text messages for {pieces} pieces: not coalesced"
    );
    // Every burst before the last completes lines, whose objects are sent at the latest with the
    // next burst's first piece: a message with objects per burst boundary, not all at the end.
    let object_messages = after
        .iter()
        .filter(|m| matches!(m, RunMessage::Objects { objects, .. } if !objects.is_empty()))
        .count();
    assert!(
        object_messages >= bursts - 1,
        "{object_messages} messages with objects for {bursts} bursts: held to the end"
    );
}

/// A rerun (`kerf_api::history::replay`, what both front ends' Rerun start from) sends the
/// request the stored run sent, with every setting it was recorded with, and is recorded as a
/// rerun of it.
#[test]
fn a_rerun_sends_the_stored_runs_request_again_and_is_recorded_as_its_rerun() {
    let (prompt, source) = terms_prompt(1);
    let good = "{\"term\": \"Ada\"}\n";
    let mut params = params(3);
    params.max_tokens = 123;
    params.settings.temperature = Some(0.4);
    params.settings.top_p = Some(0.8);
    params.settings.seed = Some(7);
    params.settings.stop = vec!["END".into()];
    params.settings.threads = Some(2);
    params.settings.context = Some(4096);
    params.settings.flash_attn = kerf_api::runs::FlashAttn::Off;
    let first = Chosen::Scripted(Box::new(Scripted::new([Reply::text(good, 4)])));
    let store = Store::in_memory().unwrap();
    let (result, _) = run(&store, &first, &prompt, &source, &params, None);
    let id = result.history_id.unwrap();

    let replay = kerf_api::history::replay(&store, id).unwrap();
    assert_eq!(replay.params.settings.provider, "scripted");
    assert_eq!(
        RunParams {
            settings: RunSettings {
                model: None,
                ..replay.params.settings.clone()
            },
            ..replay.params.clone()
        },
        params,
        "every setting comes back"
    );
    assert_eq!(replay.rendering, rendering(&prompt));
    let again = Chosen::Scripted(Box::new(Scripted::new([Reply::text(good, 4)])));
    let rerun = block_on(kerf_api::runs::run(
        Some(&store),
        &replay.job(&again),
        &CancelToken::new(),
        &mut |_| {},
    ))
    .unwrap();
    let (Chosen::Scripted(a), Chosen::Scripted(b)) = (&first, &again) else {
        unreachable!()
    };
    assert_eq!(a.requests(), b.requests(), "the same request, sent again");
    assert_eq!(b.requests()[0].max_tokens, 123);
    assert_eq!(b.requests()[0].stop, ["END"]);
    let rec = store.run(rerun.history_id.unwrap()).unwrap();
    assert_eq!(rec.summary.rerun_of, Some(id));
    assert_eq!(rec.params, store.run(id).unwrap().params);
    assert_eq!(rec.raw, good);
}

/// Issue 35: a run in its phases, as a batch will go: prepared and begun by one process, handed
/// to a provider (`submitted`), left alone when a second process opens the history, and
/// settled by a third from the reply it streams — kept exactly as a live run is.
#[test]
fn a_run_in_phases_is_submitted_survives_recovery_and_is_settled_by_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.sqlite");
    let (prompt, source) = terms_prompt(1);
    let rendering = rendering(&prompt);
    let params = params(1);
    let provider = Chosen::Scripted(Box::new(Scripted::new([Reply::text(
        "{\"term\": \"Ada\"}\n{\"term\": \"programs\"}\n",
        8,
    )])));
    let job = RunJob::new(&prompt, &source, &rendering, &provider, &params);
    let (id, request) = {
        let first = kerf_api::history::open(&path).unwrap();
        let prepared = kerf_api::runs::prepare(Some(&first), &job).unwrap();
        assert_eq!(prepared.request.max_tokens, 200);
        let id = first
            .begin_run(&prepared.new_run.unwrap())
            .unwrap()
            .submit("batch-1/0")
            .unwrap();
        (id, prepared.request)
    };
    {
        let second = kerf_api::history::open(&path).unwrap();
        assert_eq!(
            second.run(id).unwrap().summary.status,
            kerf_store::Status::Submitted
        );
    }
    let third = kerf_api::history::open(&path).unwrap();
    let out = block_on(kerf_api::runs::stream(
        &provider,
        &prompt,
        &request,
        &rendering.vars,
        false,
        params.settings.limits(),
        &CancelToken::new(),
        &mut |_| {},
    ))
    .unwrap();
    let (end, cost) = kerf_api::runs::settle(&provider, &out).unwrap();
    assert!(cost.is_none());
    assert!(third.settle_run(id, &end).unwrap());
    let kept = third.run(id).unwrap();
    assert_eq!(kept.summary.status, kerf_store::Status::Ok);
    assert_eq!(kept.summary.objects, Some(2));
    assert_eq!(kept.raw, out.raw);
}
