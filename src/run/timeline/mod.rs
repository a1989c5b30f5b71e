//! Where a run's time went, from the records alone: each attempt as an
//! interval on a slot's lane, split into setup / build / gates, its time in
//! the merge queue, and how it ended. `git arbiter report` draws it
//! ([`render`]) from the state [`load`] reads.
//!
//! An attempt runs from the event that dispatched it (`dispatch`,
//! `race_dispatch`) to the next one. The first event after its dispatch
//! settled it (`built`, `needs_rework`, `halt`, a give-back); `built` put
//! it in the merge queue, which it left by landing (`merged`), failing on
//! the merged result, or waiting to land (then `land_verified` queues it
//! again).
//!
//! Its bar is the time it held a machine-wide slot, drawn exactly where the
//! settling event records the slot ([`crate::state::SlotHeld`]). Older
//! records (and a race's instances) do not say: the bar then ends at the
//! settling event and is as long as its setup, build, gate and critic
//! commands ran (their `wall_ms`), and lanes are assigned greedily (each
//! bar to the lowest lane free at its start, in order of start), so that
//! bars of one lane never overlap but need not be the slot it held.

pub mod load;
pub mod render;

use std::collections::BTreeSet;

use crate::state::{Event, Record, MERGED_GATE_FAILED_EVENT, WAITING_EVENT};

/// The events that start an attempt.
const DISPATCH_EVENTS: &[&str] = &["dispatch", "race_dispatch"];

/// An interval in milliseconds since the Unix epoch, `from <= to`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub from_ms: u64,
    pub to_ms: u64,
}

impl Span {
    fn new(from_ms: u64, to_ms: u64) -> Span {
        Span {
            from_ms,
            to_ms: to_ms.max(from_ms),
        }
    }

    pub fn ms(&self) -> u64 {
        self.to_ms - self.from_ms
    }

    /// Do the two share more than an end point?
    pub fn overlaps(&self, other: &Span) -> bool {
        self.from_ms < other.to_ms && other.from_ms < self.to_ms
    }
}

/// The part of an attempt's bar a command took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Setup,
    Build,
    /// Gates and critics.
    Gates,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Build => "build",
            Phase::Gates => "gates",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub phase: Phase,
    pub span: Span,
}

/// How an attempt ended, as far as the records go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Landed,
    /// In the merge queue when the records end.
    Queued,
    /// Passed, waiting to land.
    Waiting,
    /// Failed (a command, or the gates on the merged result): retried.
    Rework(String),
    Halted(String),
    /// Stopped without counting (interrupted, no slot, the disk): the event.
    GivenBack(String),
    /// Not settled when the records end.
    Running,
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self {
            Outcome::Landed => "landed".into(),
            Outcome::Queued => "in the merge queue".into(),
            Outcome::Waiting => "waiting to land".into(),
            Outcome::Rework(why) => format!("needs rework: {why}"),
            Outcome::Halted(why) => format!("halted: {why}"),
            Outcome::GivenBack(why) => format!("given back: {why}"),
            Outcome::Running => "running".into(),
        }
    }
}

/// A moment worth a mark on the picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkKind {
    Landed,
    Halted,
    /// The gates failed on the merged result.
    VerifyFailed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    pub kind: MarkKind,
    pub at_ms: u64,
}

/// One attempt of one order.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    pub wo: String,
    pub attempt: u32,
    /// The conductor that dispatched it, when recorded.
    pub run: Option<String>,
    pub dispatched_ms: u64,
    /// The time it held a slot (see the module's doc).
    pub held: Span,
    /// The slot it held, when recorded.
    pub slot: Option<u32>,
    pub segments: Vec<Segment>,
    /// Its times in the merge queue: waiting for a chain and its verification.
    pub queue: Vec<Span>,
    /// How long the verification that let it land took, at the end of its
    /// last time in the queue (recorded since the queue's `verify` verdict
    /// has a wall time).
    pub verifying_ms: Option<u64>,
    pub outcome: Outcome,
    pub marks: Vec<Mark>,
    /// What its builder reported it cost, when it did.
    pub cost_usd: Option<f64>,
    /// The index of the history event that dispatched it, and of its last.
    pub events: (usize, usize),
}

impl Attempt {
    /// Is this attempt a retry of its order?
    pub fn is_retry(&self) -> bool {
        self.attempt > 1
    }
}

/// What the commands of an attempt (`verdicts`) reported it cost, if any
/// did: the one place the timeline reads cost.
fn reported_cost(verdicts: &[crate::state::Verdict]) -> Option<f64> {
    crate::state::cost::Spent::of_attempt(verdicts).cost_usd
}

fn at_ms(e: &Event) -> u64 {
    u64::try_from(e.at).unwrap_or(0) * 1000 + u64::from(e.ms.unwrap_or(0))
}

/// The wall times of an attempt's setup, build and checks (gates and
/// critics), in milliseconds; `None` when none was recorded.
fn walls(verdicts: &[crate::state::Verdict]) -> Option<[u64; 3]> {
    let mut walls = [0u64; 3];
    let mut timed = false;
    for v in verdicts {
        let Some(ms) = v.wall_ms else { continue };
        let at = match v.kind.as_str() {
            "setup" => 0,
            "build" => 1,
            "gate" | "critic" => 2,
            _ => continue,
        };
        walls[at] += ms;
        timed = true;
    }
    timed.then_some(walls)
}

/// The attempts `record` tells of, in the order they ran.
pub fn attempts_of(record: &Record) -> Vec<Attempt> {
    let history = &record.history;
    let starts: Vec<usize> = (0..history.len())
        .filter(|&i| DISPATCH_EVENTS.contains(&history[i].event.as_str()))
        .collect();
    let mut out = Vec::with_capacity(starts.len());
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).map_or(history.len(), |&next| next);
        let dispatch = &history[start];
        let number = dispatch.attempt.unwrap_or(0);
        let current = n + 1 == starts.len() && number == record.attempts;
        let (verdicts, queue_wait_ms) = if current {
            (record.verdicts.as_slice(), record.queue_wait_ms)
        } else {
            record
                .earlier
                .iter()
                .rev()
                .find(|p| p.attempt == number)
                .map_or((&[][..], None), |p| {
                    (p.verdicts.as_slice(), p.queue_wait_ms)
                })
        };
        let mut attempt = read_attempt(record, start, end, walls(verdicts), queue_wait_ms);
        attempt.cost_usd = reported_cost(verdicts);
        attempt.verifying_ms = verdicts
            .iter()
            .rev()
            .find(|v| v.kind == "verify" && v.passed)
            .and_then(|v| v.wall_ms);
        out.push(attempt);
    }
    out
}

/// The attempt dispatched by history event `start`, whose events end
/// before `end`.
fn read_attempt(
    record: &Record,
    start: usize,
    end: usize,
    walls: Option<[u64; 3]>,
    queue_wait_ms: Option<u64>,
) -> Attempt {
    let events = &record.history[start..end];
    let dispatch = &events[0];
    let dispatched_ms = at_ms(dispatch);
    let last_ms = events.iter().map(at_ms).max().unwrap_or(dispatched_ms);
    let settled = events.get(1);
    let recorded = events.iter().find_map(|e| e.slot);
    let held = match (recorded, settled, walls) {
        (Some(slot), _, _) => Span::new(slot.from_ms, slot.to_ms),
        (None, Some(settled), Some(walls)) => {
            let to = at_ms(settled);
            let ran: u64 = walls.iter().sum();
            Span::new(to.saturating_sub(ran).max(dispatched_ms), to)
        }
        (None, Some(settled), None) => {
            Span::new(dispatched_ms + queue_wait_ms.unwrap_or(0), at_ms(settled))
        }
        (None, None, _) => Span::new(dispatched_ms + queue_wait_ms.unwrap_or(0), last_ms),
    };
    let mut outcome = Outcome::Running;
    let mut marks = Vec::new();
    let mut queue = Vec::new();
    let mut queued_at: Option<u64> = None;
    for e in &events[1..] {
        let at = at_ms(e);
        let detail = || e.detail.clone().unwrap_or_default();
        let mut leave_queue = |queue: &mut Vec<Span>| {
            if let Some(from) = queued_at.take() {
                queue.push(Span::new(from, at));
            }
        };
        match e.event.as_str() {
            "built" | "land_verified" => {
                queued_at = Some(at);
                outcome = Outcome::Queued;
            }
            "merged" | "recovered_done" | "reconstructed_done" => {
                leave_queue(&mut queue);
                marks.push(Mark {
                    kind: MarkKind::Landed,
                    at_ms: at,
                });
                outcome = Outcome::Landed;
            }
            WAITING_EVENT => {
                leave_queue(&mut queue);
                outcome = Outcome::Waiting;
            }
            MERGED_GATE_FAILED_EVENT => {
                leave_queue(&mut queue);
                marks.push(Mark {
                    kind: MarkKind::VerifyFailed,
                    at_ms: at,
                });
                outcome = Outcome::Rework(detail());
            }
            "needs_rework" => outcome = Outcome::Rework(detail()),
            "recovered_needs_rework" => {
                outcome = Outcome::Rework("its conductor ended before it settled".into())
            }
            "halt" => {
                leave_queue(&mut queue);
                marks.push(Mark {
                    kind: MarkKind::Halted,
                    at_ms: at,
                });
                outcome = Outcome::Halted(detail());
            }
            "halted_in_flight" => {
                if !matches!(outcome, Outcome::Halted(_)) {
                    outcome = Outcome::Halted("halted in flight".into());
                }
            }
            // What happened after its fate, or on the way to it.
            "clear" | "clearing" | "halt_lifted" | "pick" | "race_fallback"
            | "kept_work_missing" => {}
            // Any other settling event gave the attempt back (interrupted,
            // the disk, a command that cannot run, …), under its own name.
            given_back => {
                if outcome == Outcome::Running {
                    outcome = Outcome::GivenBack(given_back.to_owned());
                }
            }
        }
    }
    if let Some(from) = queued_at {
        // Still queued when the records end.
        queue.push(Span::new(from, last_ms.max(from)));
    }
    Attempt {
        wo: record.wo.clone(),
        attempt: dispatch.attempt.unwrap_or(0),
        run: dispatch.run.clone(),
        dispatched_ms,
        held,
        slot: recorded.map(|s| s.index),
        segments: walls.map_or_else(Vec::new, |w| segments(held, w)),
        queue,
        outcome,
        marks,
        cost_usd: None,
        verifying_ms: None,
        events: (start, end - 1),
    }
}

/// Setup and build from the start of `held`, the checks up to its end
/// (committing the builder's work, between build and gates, is not timed).
fn segments(held: Span, [setup, build, checks]: [u64; 3]) -> Vec<Segment> {
    let clamp = |ms: u64| ms.min(held.to_ms);
    let setup_end = clamp(held.from_ms + setup);
    let build_end = clamp(setup_end + build);
    let gates_from = held.to_ms.saturating_sub(checks).max(build_end);
    [
        (Phase::Setup, Span::new(held.from_ms, setup_end)),
        (Phase::Build, Span::new(setup_end, build_end)),
        (Phase::Gates, Span::new(gates_from, held.to_ms)),
    ]
    .into_iter()
    .filter(|(_, span)| span.ms() > 0)
    .map(|(phase, span)| Segment { phase, span })
    .collect()
}

/// The lowest of `lanes` that `span` overlaps nothing on (a new one when
/// there is none), `span` now on it.
fn first_fit(lanes: &mut Vec<Vec<Span>>, span: Span) -> usize {
    let lane = match lanes
        .iter()
        .position(|l| l.iter().all(|s| !s.overlaps(&span)))
    {
        Some(lane) => lane,
        None => {
            lanes.push(Vec::new());
            lanes.len() - 1
        }
    };
    lanes[lane].push(span);
    lane
}

/// Each span's lane, spans taken in order of start (then end, then
/// position), each to the lowest lane it overlaps nothing on: no two spans
/// of one lane overlap, and no fewer lanes would do. Returns the lanes and
/// how many there are.
pub fn assign_lanes(spans: &[Span]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].from_ms, spans[i].to_ms, i));
    let mut taken = Vec::new();
    let mut lanes = vec![0; spans.len()];
    for i in order {
        lanes[i] = first_fit(&mut taken, spans[i]);
    }
    (lanes, taken.len())
}

/// Can the slots the attempts recorded be their lanes? Not when two on one
/// slot overlap: a slot of another machine sharing the state has the same
/// number.
fn slots_agree(attempts: &[Attempt]) -> bool {
    let mut on_slots: Vec<(u32, Span)> = attempts
        .iter()
        .filter_map(|a| a.slot.map(|s| (s, a.held)))
        .collect();
    on_slots.sort_by_key(|&(slot, held)| (slot, held.from_ms));
    let mut busy_until: Option<(u32, u64)> = None;
    for (slot, held) in on_slots {
        busy_until = match busy_until {
            Some((on, until)) if on == slot && held.from_ms < until => return false,
            Some((on, until)) if on == slot => Some((on, until.max(held.to_ms))),
            _ => Some((slot, held.to_ms)),
        };
    }
    true
}

/// Each attempt's lane (`attempts` in order of start), the lanes' names,
/// and how many of them are slots: `slot N` for the slots the attempts recorded, when they agree
/// ([`slots_agree`]), then `lane N` for the attempts placed by
/// [`first_fit`], those that recorded none (or all, when the slots do not
/// agree), in gaps of the slots' lanes or on lanes of their own.
fn place(attempts: &[Attempt]) -> (Vec<usize>, Vec<String>, usize) {
    let trusted = slots_agree(attempts);
    let slots: Vec<u32> = match trusted {
        true => attempts
            .iter()
            .filter_map(|a| a.slot)
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect(),
        false => Vec::new(),
    };
    let mut taken: Vec<Vec<Span>> = vec![Vec::new(); slots.len()];
    let mut lanes = vec![0; attempts.len()];
    let mut unplaced = Vec::new();
    for (i, a) in attempts.iter().enumerate() {
        match a.slot.and_then(|s| slots.binary_search(&s).ok()) {
            Some(lane) => {
                taken[lane].push(a.held);
                lanes[i] = lane;
            }
            None => unplaced.push(i),
        }
    }
    for i in unplaced {
        lanes[i] = first_fit(&mut taken, attempts[i].held);
    }
    let names = (0..taken.len())
        .map(|lane| match slots.get(lane) {
            Some(slot) => format!("slot {slot}"),
            None => format!("lane {}", lane - slots.len() + 1),
        })
        .collect();
    (lanes, names, slots.len())
}

/// The attempts of a run on their lanes, and the merge queue's spans on theirs.
#[derive(Clone, Debug)]
pub struct Timeline {
    /// In order of start.
    pub attempts: Vec<Attempt>,
    /// The lane of each attempt.
    pub lanes: Vec<usize>,
    /// Each lane's name: `slot N`, the slot its attempts recorded, or
    /// `lane N`, assigned (see [`place`]).
    pub lane_names: Vec<String>,
    /// How many lanes, the first ones, are slots the attempts recorded.
    pub slot_lanes: usize,
    /// The merge queue's spans: the attempt (an index into `attempts`), the
    /// span, and its queue lane.
    pub queue: Vec<(usize, Span, usize)>,
    pub queue_lanes: usize,
    /// The whole picture: the first dispatch to the last thing that happened.
    pub span: Span,
}

impl Timeline {
    pub fn new(mut attempts: Vec<Attempt>) -> Timeline {
        attempts.sort_by(|a, b| {
            (a.held.from_ms, a.held.to_ms, &a.wo, a.attempt).cmp(&(
                b.held.from_ms,
                b.held.to_ms,
                &b.wo,
                b.attempt,
            ))
        });
        let (lanes, lane_names, slot_lanes) = place(&attempts);
        let queued: Vec<(usize, Span)> = attempts
            .iter()
            .enumerate()
            .flat_map(|(i, a)| a.queue.iter().map(move |s| (i, *s)))
            .collect();
        let spans: Vec<Span> = queued.iter().map(|(_, s)| *s).collect();
        let (queue_lanes, queue_lane_count) = assign_lanes(&spans);
        let queue = queued
            .into_iter()
            .zip(queue_lanes)
            .map(|((i, s), lane)| (i, s, lane))
            .collect();
        let from = attempts
            .iter()
            .map(|a| a.dispatched_ms.min(a.held.from_ms))
            .min();
        let to = attempts
            .iter()
            .flat_map(|a| {
                std::iter::once(a.held.to_ms)
                    .chain(a.queue.iter().map(|s| s.to_ms))
                    .chain(a.marks.iter().map(|m| m.at_ms))
            })
            .max();
        let span = match (from, to) {
            (Some(from), Some(to)) => Span::new(from, to),
            _ => Span::new(0, 0),
        };
        Timeline {
            attempts,
            lanes,
            lane_names,
            slot_lanes,
            queue,
            queue_lanes: queue_lane_count,
            span,
        }
    }

    /// From the first dispatch to the last thing that happened.
    pub fn makespan_ms(&self) -> u64 {
        self.span.ms()
    }

    /// Slot time the attempts held, over the lanes' time in the makespan;
    /// `None` when there is no time to speak of.
    pub fn utilisation(&self) -> Option<f64> {
        let lanes = self.lane_names.len() as f64;
        let makespan = self.makespan_ms() as f64;
        if lanes == 0.0 || makespan == 0.0 {
            return None;
        }
        let busy: u64 = self.attempts.iter().map(|a| a.held.ms()).sum();
        Some(busy as f64 / (lanes * makespan))
    }

    /// The orders an attempt landed.
    pub fn landed(&self) -> usize {
        self.orders_where(|a| a.outcome == Outcome::Landed)
    }

    /// The orders an attempt halted.
    pub fn halted(&self) -> usize {
        self.orders_where(|a| matches!(a.outcome, Outcome::Halted(_)))
    }

    fn orders_where(&self, f: impl Fn(&Attempt) -> bool) -> usize {
        self.attempts
            .iter()
            .filter(|a| f(a))
            .map(|a| a.wo.as_str())
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// The reported cost of the attempts, and how many reported none.
    pub fn cost(&self) -> (f64, usize) {
        let known: f64 = self.attempts.iter().filter_map(|a| a.cost_usd).sum();
        let unknown = self
            .attempts
            .iter()
            .filter(|a| a.cost_usd.is_none())
            .count();
        (known, unknown)
    }
}

#[cfg(test)]
mod tests;
