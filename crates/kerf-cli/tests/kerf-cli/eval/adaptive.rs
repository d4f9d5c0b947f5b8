//! `--concurrency auto` against a loopback server with a fixed capacity that refuses one
//! request past it with 429 (and `retry-after-ms`): below the capacity the number in flight
//! must grow to it (the default start of 4 would leave a large capacity idle), above it it
//! must back off (a small one would be refused again and again). Both end with every cell
//! measured and few refusals. What is asserted is how the client behaved — how many it held
//! in flight, how often it was refused — not how fast the machine is.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Again, Model, kerf_in, rows, setup};
use crate::{stderr, stdout_json};

/// Run the eval (3 rows × 2 prompts × 2 budgets × `repeat`) against a server of `capacity`
/// whose replies take 100 ms (long beside a busy machine's jitter, so whether "the latency
/// holds" is the server's doing, not the scheduler's): the requests served, the most served at
/// once, and the refusals.
fn against(capacity: usize, repeat: u32) -> (usize, usize, usize) {
    against_server(Again::Capacity(capacity), repeat)
}

fn against_server(again: Again, repeat: u32) -> (usize, usize, usize) {
    let capacity = match again {
        Again::Capacity(n) | Again::Slots(n) => n,
        _ => 0,
    };
    let rows = rows();
    let model = Model::start_with(rows.clone(), Duration::from_millis(100), again);
    let (dir, data) = setup(&model, &rows);
    let repeat = repeat.to_string();
    let o = kerf_in(
        dir.path(),
        &[
            "eval",
            data.to_str().unwrap(),
            "--prompt",
            "prompts/agent-kg-extract.json",
            "--prompt",
            "prompts/agent-kg-extract-array.json",
            "--provider",
            "srv",
            "--max-tokens",
            "40,1000",
            "--constrain",
            "none",
            "--concurrency",
            "auto",
            "--repeat",
            &repeat,
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let report = stdout_json(&o);
    assert_eq!(report["pending"], 0, "{report}");
    let failed: u64 = report["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["failed"].as_u64().unwrap())
        .sum();
    assert_eq!(failed, 0, "no cell failed");
    let refused = model.counts.refused.load(Ordering::SeqCst);
    let served = model.requests() - refused;
    eprintln!(
        "capacity {capacity}: {served} served, at most {} at once, {refused} refused",
        model.peak()
    );
    (served, model.peak(), refused)
}

#[test]
fn auto_concurrency_grows_to_a_large_capacity_and_backs_off_from_a_small_one() {
    let (served, peak, refused) = against(24, 15);
    assert_eq!(served, 180);
    assert!(
        peak >= 12,
        "grew past the start of 4 towards 24: at most {peak} at once"
    );
    assert!(
        refused * 10 <= served,
        "few refusals: {refused} for {served}"
    );

    let (served, peak, refused) = against(2, 8);
    assert_eq!(served, 96);
    assert!(peak <= 2);
    assert!(
        refused * 4 <= served,
        "backed off: {refused} refusals for {served}"
    );
}

/// A server that queues what is past its slots (it answers the headers at once, the first token
/// once a slot is free) refuses nothing, so only the latency can tell the client to stop
/// growing: the time to the first token shows the queue where the time to the headers did not.
/// The number in flight settles where the queue doubles the latency (two to three times the
/// slots: the window's tolerance) instead of growing on towards the ceiling of 64, as it did
/// when it heard the headers' time (26 at once by the end of these 360 cells before the window
/// had a slow start; with one, it would double to the ceiling in a few rounds).
#[test]
fn auto_concurrency_stops_growing_when_a_server_queues_past_its_slots() {
    let (served, peak, refused) = against_server(Again::Slots(4), 30);
    assert_eq!((served, refused), (360, 0));
    assert!(
        peak <= 20,
        "in flight stayed near the 4 slots, not the ceiling: at most {peak} at once"
    );
}
