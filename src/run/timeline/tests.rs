use proptest::prelude::*;

use super::*;
use crate::state::{PastAttempt, SlotHeld, Verdict};

/// An event at `ms` milliseconds since the epoch.
fn event(ms: u64, name: &str, attempt: u32) -> Event {
    Event {
        at: (ms / 1000) as i64,
        ms: Some((ms % 1000) as u32),
        event: name.into(),
        attempt: (attempt > 0).then_some(attempt),
        detail: None,
        run: None,
        slot: None,
    }
}

fn dispatch(ms: u64, attempt: u32, run: &str) -> Event {
    Event {
        run: Some(run.into()),
        ..event(ms, "dispatch", attempt)
    }
}

fn verdict(kind: &str, wall_ms: u64) -> Verdict {
    Verdict {
        kind: kind.into(),
        command: "cmd".into(),
        passed: true,
        exit_code: Some(0),
        detail: None,
        wall_ms: Some(wall_ms),
        log: None,
        report: None,
    }
}

const T: u64 = 1_767_225_600_000;

#[test]
fn a_failed_attempt_then_a_landed_one_with_its_slot_recorded() {
    let mut r = Record::new("wo-1", false, 3);
    r.attempts = 2;
    r.earlier.push(PastAttempt {
        attempt: 1,
        verdicts: vec![verdict("build", 4_000)],
        queue_wait_ms: None,
    });
    r.verdicts = vec![
        verdict("setup", 1_000),
        verdict("build", 5_000),
        verdict("gate", 2_000),
    ];
    r.history = vec![
        dispatch(T, 1, "c1"),
        Event {
            detail: Some("build exit 1".into()),
            ..event(T + 5_000, "needs_rework", 1)
        },
        dispatch(T + 6_000, 2, "c1"),
        Event {
            slot: Some(SlotHeld {
                index: 3,
                from_ms: T + 6_500,
                to_ms: T + 15_000,
            }),
            ..event(T + 15_100, "built", 2)
        },
        event(T + 18_000, "merged", 2),
    ];
    let attempts = attempts_of(&r);
    assert_eq!(attempts.len(), 2);
    let (first, second) = (&attempts[0], &attempts[1]);
    assert_eq!(first.outcome, Outcome::Rework("build exit 1".into()));
    // Not recorded: as long as its build ran, ending when it settled.
    assert_eq!(first.held, Span::new(T + 1_000, T + 5_000));
    assert_eq!(first.slot, None);
    assert_eq!(first.run.as_deref(), Some("c1"));
    assert!(!first.is_retry());

    assert_eq!(second.outcome, Outcome::Landed);
    assert!(second.is_retry());
    assert_eq!(second.held, Span::new(T + 6_500, T + 15_000));
    assert_eq!(second.slot, Some(3));
    let phases: Vec<(Phase, Span)> = second.segments.iter().map(|s| (s.phase, s.span)).collect();
    assert_eq!(
        phases,
        [
            (Phase::Setup, Span::new(T + 6_500, T + 7_500)),
            (Phase::Build, Span::new(T + 7_500, T + 12_500)),
            // The checks end with the slot; committing came between.
            (Phase::Gates, Span::new(T + 13_000, T + 15_000)),
        ]
    );
    assert_eq!(second.queue, [Span::new(T + 15_100, T + 18_000)]);
    assert_eq!(
        second.marks,
        [Mark {
            kind: MarkKind::Landed,
            at_ms: T + 18_000
        }]
    );
    assert_eq!(second.events, (2, 4));
}

#[test]
fn outcomes_of_give_backs_halts_waits_and_unsettled_attempts() {
    let outcome = |events: Vec<Event>| {
        let mut r = Record::new("wo-1", false, 3);
        r.attempts = 1;
        r.history = events;
        attempts_of(&r).remove(0).outcome
    };
    // A give-back logs with the attempt taken back (none left: no number).
    assert_eq!(
        outcome(vec![dispatch(T, 1, "c"), event(T + 9, "interrupted", 0)]),
        Outcome::GivenBack("interrupted".into())
    );
    assert_eq!(
        outcome(vec![
            dispatch(T, 1, "c"),
            Event {
                detail: Some("blocking_critique".into()),
                ..event(T + 9, "halt", 1)
            },
            event(T + 10, "clear", 0),
        ]),
        Outcome::Halted("blocking_critique".into())
    );
    assert_eq!(
        outcome(vec![
            dispatch(T, 1, "c"),
            event(T + 9, "built", 1),
            event(T + 10, WAITING_EVENT, 1),
        ]),
        Outcome::Waiting
    );
    assert_eq!(
        outcome(vec![dispatch(T, 1, "c"), event(T + 9, "built", 1)]),
        Outcome::Queued
    );
    assert_eq!(outcome(vec![dispatch(T, 1, "c")]), Outcome::Running);
}

#[test]
fn the_gates_failing_on_the_merged_result_end_the_queue_with_a_mark() {
    let mut r = Record::new("wo-1", false, 3);
    r.attempts = 1;
    r.history = vec![
        dispatch(T, 1, "c"),
        event(T + 1_000, "built", 1),
        Event {
            detail: Some("gate failed".into()),
            ..event(T + 4_000, MERGED_GATE_FAILED_EVENT, 1)
        },
    ];
    let a = attempts_of(&r).remove(0);
    assert_eq!(a.outcome, Outcome::Rework("gate failed".into()));
    assert_eq!(a.queue, [Span::new(T + 1_000, T + 4_000)]);
    assert_eq!(a.marks[0].kind, MarkKind::VerifyFailed);
}

#[test]
fn cost_is_read_from_the_attempt_that_reported_it() {
    let reported = |cost: Option<f64>| Verdict {
        report: Some(crate::state::cost::Report {
            cost_usd: cost,
            ..Default::default()
        }),
        ..verdict("build", 1_000)
    };
    let mut r = Record::new("wo-1", false, 3);
    r.attempts = 3;
    r.earlier = vec![
        PastAttempt {
            attempt: 1,
            verdicts: vec![reported(Some(0.25))],
            queue_wait_ms: None,
        },
        PastAttempt {
            attempt: 2,
            verdicts: vec![verdict("build", 1_000)],
            queue_wait_ms: None,
        },
    ];
    r.verdicts = vec![reported(Some(0.5)), reported(None), reported(Some(0.125))];
    r.history = vec![
        dispatch(T, 1, "c1"),
        event(T + 1_000, "needs_rework", 1),
        dispatch(T + 2_000, 2, "c1"),
        event(T + 3_000, "needs_rework", 2),
        dispatch(T + 4_000, 3, "c1"),
        event(T + 5_000, "merged", 3),
    ];
    let costs: Vec<Option<f64>> = attempts_of(&r).iter().map(|a| a.cost_usd).collect();
    assert_eq!(costs, [Some(0.25), None, Some(0.625)]);
}

fn attempt(wo: &str, from: u64, to: u64, slot: Option<u32>) -> Attempt {
    Attempt {
        wo: wo.into(),
        attempt: 1,
        run: None,
        dispatched_ms: from,
        held: Span::new(from, to),
        slot,
        segments: Vec::new(),
        queue: Vec::new(),
        outcome: Outcome::Landed,
        marks: Vec::new(),
        cost_usd: None,
        verifying_ms: None,
        events: (0, 0),
    }
}

#[test]
fn recorded_slots_are_the_lanes_and_utilisation_is_held_over_lanes_times_makespan() {
    let t = Timeline::new(vec![
        attempt("a", 0, 4_000, Some(5)),
        attempt("b", 1_000, 3_000, Some(2)),
        attempt("c", 4_000, 8_000, Some(5)),
    ]);
    assert_eq!(
        (t.lane_names.as_slice(), t.slot_lanes),
        (&["slot 2".to_owned(), "slot 5".to_owned()][..], 2)
    );
    let lane_of = |wo: &str| t.lanes[t.attempts.iter().position(|a| a.wo == wo).unwrap()];
    assert_eq!((lane_of("a"), lane_of("b"), lane_of("c")), (1, 0, 1));
    assert_eq!(t.makespan_ms(), 8_000);
    // (4 + 2 + 4) s held over 2 lanes × 8 s.
    assert_eq!(t.utilisation(), Some(10.0 / 16.0));
    assert_eq!(t.landed(), 3);
}

#[test]
fn attempts_without_a_slot_fill_gaps_of_the_slots_or_lanes_of_their_own() {
    let t = Timeline::new(vec![
        attempt("a", 0, 4_000, Some(0)),
        attempt("b", 5_000, 6_000, None),
        attempt("c", 5_000, 9_000, Some(0)),
    ]);
    assert_eq!(t.lane_names, ["slot 0", "lane 1"]);
    assert_eq!(t.slot_lanes, 1);
    let lane_of = |wo: &str| t.lanes[t.attempts.iter().position(|a| a.wo == wo).unwrap()];
    assert_eq!((lane_of("a"), lane_of("b"), lane_of("c")), (0, 1, 0));
    let t = Timeline::new(vec![
        attempt("a", 0, 4_000, Some(0)),
        attempt("b", 4_000, 5_000, None),
        attempt("c", 5_000, 9_000, Some(0)),
    ]);
    assert_eq!(
        (t.lane_names.len(), t.lanes.as_slice()),
        (1, &[0, 0, 0][..])
    );
}

#[test]
fn slots_overlapping_on_one_number_are_not_trusted() {
    // Two machines' slot 0 at once.
    let t = Timeline::new(vec![
        attempt("a", 0, 4_000, Some(0)),
        attempt("b", 1_000, 3_000, Some(0)),
    ]);
    assert_eq!(t.lane_names, ["lane 1", "lane 2"]);
    assert_eq!(t.slot_lanes, 0);
}

#[test]
fn an_empty_timeline_has_no_utilisation() {
    let t = Timeline::new(Vec::new());
    assert_eq!(t.makespan_ms(), 0);
    assert_eq!(t.utilisation(), None);
    assert_eq!(t.cost(), (0.0, 0));
}

proptest! {
    /// Greedy assignment in order of start: no two spans of one lane
    /// overlap, and it uses as many lanes as spans ever run at once.
    #[test]
    fn assigned_lanes_never_overlap_and_are_as_few_as_can_be(
        raw in proptest::collection::vec((0u64..1_000, 1u64..300), 0..40)
    ) {
        let spans: Vec<Span> = raw.iter().map(|&(from, len)| Span::new(from, from + len)).collect();
        let (lanes, n) = assign_lanes(&spans);
        for i in 0..spans.len() {
            prop_assert!(lanes[i] < n);
            for j in i + 1..spans.len() {
                prop_assert!(lanes[i] != lanes[j] || !spans[i].overlaps(&spans[j]));
            }
        }
        let most_at_once = spans
            .iter()
            .map(|s| spans.iter().filter(|o| o.from_ms <= s.from_ms && s.from_ms < o.to_ms).count())
            .max()
            .unwrap_or(0);
        prop_assert_eq!(n, most_at_once);
    }
}

#[test]
fn hostile_text_is_escaped_and_control_characters_dropped() {
    assert_eq!(
        render::escape("<script>&\"x'\u{1b}]0;\u{7}\u{fffe}\r\n\u{9b}"),
        "&lt;script&gt;&amp;&quot;x&apos;]0;\n"
    );
}
