//! Cells that depend on cells, on the one cell runner: a plan whose cells come in *groups* (a
//! document) run in *stages* (its chunks, then a second pass over what the first gave). A
//! stage's cells start only once the group's stage before has ended, and are made from its
//! ends; when a group has no stage left, its ends are merged into one (a row to score) before
//! the plan sees them. Groups run side by side, each lane as wide as its provider allows, so a
//! document waiting on its first pass never holds another document back.
//!
//! This is the runner's order and grouping, not a second runner: every cell still goes through
//! [`run_cells`], keyed, kept and paced as any other.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use kerf_llm::CancelToken;

use super::cells::{Cell, CellEnd, Hooks, Lane, Runner, run_cells};
use crate::error::Result;
use crate::runs::Chosen;

/// What a staged plan says of its groups.
pub trait Stages<'c> {
    /// A group (what its merged end is handed over under).
    type Group;
    /// A cell's key within its group.
    type Key;
    /// What a group's ends merge into.
    type Merged;

    /// The cells of the stage after the ends so far (`ended`: every end of the group, in the
    /// order they ended; empty for its first stage), or none: the group is done.
    fn next(
        &self,
        group: &Self::Group,
        ended: &[(Self::Key, CellEnd)],
    ) -> Vec<(Self::Key, Result<Cell<'c>>)>;

    /// The group's ends as one.
    fn merge(&self, group: &Self::Group, ended: Vec<(Self::Key, CellEnd)>) -> Result<Self::Merged>;
}

/// One provider's groups.
pub struct StagedLane<'c, G> {
    pub provider: &'c Chosen,
    /// Cells in flight at once (see [`super::cells::width`]).
    pub concurrency: usize,
    pub groups: Vec<G>,
}

/// Where a cell sits: its lane, its group's index in the lane, its key in the group.
type Placed<K> = (usize, usize, K);

/// The cells ready to start in one lane, in order.
type Queue<'c, K> = Rc<RefCell<VecDeque<(Placed<K>, Result<Cell<'c>>)>>>;

/// The groups in flight, by lane and index.
type Groups<G, K> = Rc<RefCell<HashMap<(usize, usize), Running<G, K>>>>;

/// A group as it runs: its cells still in flight, and its ends so far.
struct Running<G, K> {
    group: G,
    pending: usize,
    ended: Vec<(K, CellEnd)>,
}

/// The cells ready to start in one lane: the next stages of its groups first, then the first
/// stage of its next group (so a lane finishes documents rather than starting every one).
struct Ready<'c, 's, S: Stages<'c>> {
    lane: usize,
    stages: &'s S,
    queue: Queue<'c, S::Key>,
    groups: std::iter::Enumerate<std::vec::IntoIter<S::Group>>,
    running: Groups<S::Group, S::Key>,
}

impl<'c, S: Stages<'c>> Iterator for Ready<'c, '_, S> {
    type Item = (Placed<S::Key>, Result<Cell<'c>>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(cell) = self.queue.borrow_mut().pop_front() {
                return Some(cell);
            }
            // Asked again once a group's stage ends: `None` until then is "not yet".
            let (gi, group) = self.groups.next()?;
            let first = self.stages.next(&group, &[]);
            if first.is_empty() {
                // Nothing to run, nothing to wait for: a group of no cells is left out.
                continue;
            }
            let mut running = self.running.borrow_mut();
            running.insert(
                (self.lane, gi),
                Running {
                    group,
                    pending: first.len(),
                    ended: Vec::new(),
                },
            );
            let mut queue = self.queue.borrow_mut();
            queue.extend(first.into_iter().map(|(k, c)| ((self.lane, gi, k), c)));
        }
    }
}

/// Run every lane's groups stage by stage, handing each group's merged end to `on_merged` as
/// the group ends (in the order groups end). Cancelling stops starting cells as [`run_cells`]
/// does; a group cut off before its last stage is never merged.
pub fn run_staged<'c, S: Stages<'c>>(
    runner: &Runner<'_>,
    lanes: Vec<StagedLane<'c, S::Group>>,
    stages: &S,
    cancel: &CancelToken,
    mut on_merged: impl FnMut(S::Group, S::Merged) -> Result<()>,
) -> Result<()> {
    let running: Groups<S::Group, S::Key> = Rc::new(RefCell::new(HashMap::new()));
    let queues: Vec<Queue<'c, S::Key>> = lanes
        .iter()
        .map(|_| Rc::new(RefCell::new(VecDeque::new())))
        .collect();
    let cell_lanes = lanes
        .into_iter()
        .enumerate()
        .map(|(lane, l)| {
            let ready = Ready {
                lane,
                stages,
                queue: queues[lane].clone(),
                groups: l.groups.into_iter().enumerate(),
                running: running.clone(),
            };
            Lane::new(l.provider, l.concurrency, false, ready)
        })
        .collect();
    run_cells(
        runner,
        cell_lanes,
        cancel,
        Hooks::default(),
        |(lane, gi, key), end| {
            let mut all = running.borrow_mut();
            let Some(g) = all.get_mut(&(lane, gi)) else {
                return Ok(());
            };
            g.ended.push((key, end));
            g.pending -= 1;
            if g.pending > 0 {
                return Ok(());
            }
            let next = stages.next(&g.group, &g.ended);
            if !next.is_empty() {
                g.pending = next.len();
                queues[lane]
                    .borrow_mut()
                    .extend(next.into_iter().map(|(k, c)| ((lane, gi, k), c)));
                return Ok(());
            }
            let Some(done) = all.remove(&(lane, gi)) else {
                return Ok(());
            };
            drop(all);
            let merged = stages.merge(&done.group, done.ended)?;
            on_merged(done.group, merged)
        },
    )
}
