//! Batch selection: from the eligible work orders pick a set
//! whose declared files are pairwise disjoint, at most `max`, deterministically.
//!
//! Order: by id. Eligible: not terminal, and `ready`, `needs_rework`, or
//! `blocked` with every dependency `done`. A WO with no declared files may
//! touch anything (the drift check accepts all it changes): it forms a solo
//! batch, and only when no other WO is eligible.
//!
//! Deferral reasons: `overlap` when the WO's declared files overlap those of
//! a WO already chosen while the batch still had room (`conflicts_with` names
//! every such WO); `max_reached` for every WO considered after the batch is
//! full, without comparing it to the batch, so a WO that would also overlap
//! is reported as `max_reached` then; `no_declared_files` for a WO without
//! declared files that cannot run alone now; `hand_made_branch` for a WO whose
//! branch `arbiter/<id>` holds work made by hand (building it would replace
//! that work: `merge-back` it, or remove it, first); `shallow_history` for a
//! WO with no record that may have landed before a shallow clone's history
//! begins; `claimed` for a WO that
//! could touch files of an order a live conductor is building now, or of
//! passed work waiting to land (`verified`; `conflicts_with` names those
//! orders): two conductors never build overlapping orders at once.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::run::progress::Event;
use crate::run::reconcile::Row;
use crate::state::orders::{Orders, WorkOrder};
use crate::state::scope::sets_overlap;
use crate::state::Status;

/// The deferral reason of a WO that could touch files an order in progress
/// (held by a live conductor, this one or another) has claimed.
pub const CLAIMED: &str = "claimed";

/// Could `a` and `b` touch a file in common? An order without declared
/// files may touch anything.
pub fn could_collide(a: &WorkOrder, b: &WorkOrder) -> bool {
    a.touches_anything() || b.touches_anything() || sets_overlap(&a.files, &b.files)
}

/// The order another live conductor is building whose declared files `wo`
/// could touch too, if any, as the transaction `txn` sees the records.
pub fn claim_holder(
    ctx: &crate::state::context::Context,
    txn: &mut crate::state::Txn<'_, '_>,
    orders: &Orders,
    wo: &WorkOrder,
    me: &str,
) -> crate::Result<Option<String>> {
    for other in orders.iter() {
        if other.id == wo.id || !could_collide(wo, other) {
            continue;
        }
        let Some(record) = txn.stored(&other.id)? else {
            continue;
        };
        let building = record.status == Status::InProgress
            && record.owner.as_deref().is_some_and(|o| o != me)
            && crate::run::conductor::owns_live(ctx, &record);
        // Passed work waiting to land keeps its claim until it lands.
        if !record.halted && (building || record.waits_to_land()) {
            return Ok(Some(other.id.clone()));
        }
    }
    Ok(None)
}

/// The deferral reason of a WO whose branch holds work made by hand.
pub const HAND_MADE_BRANCH: &str = "hand_made_branch";

/// The deferral reason of a WO that may have landed before a shallow
/// clone's history begins ([`Row::may_have_landed_before`]).
pub const SHALLOW_HISTORY: &str = "shallow_history";

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Picked {
    #[serde(rename = "id")]
    pub wo_id: String,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Deferred {
    #[serde(rename = "id")]
    pub wo_id: String,
    /// `overlap`, `max_reached`, `no_declared_files`, `hand_made_branch`,
    /// `shallow_history` or `claimed`.
    pub reason: String,
    pub conflicts_with: Vec<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Batch {
    pub version: u32,
    pub batch: Vec<Picked>,
    pub deferred: Vec<Deferred>,
    pub warnings: Vec<String>,
    /// Eligible work orders considered (batch + deferred).
    #[serde(skip)]
    pub ready: usize,
    #[serde(skip)]
    pub max: usize,
}

impl Batch {
    /// The one compact stderr line of the kernel: the event a round reports
    /// for each batch it selects.
    pub fn summary_line(&self) -> String {
        Event::Batch {
            ready: self.ready,
            batch: self.batch.len(),
            deferred: self.deferred.len(),
            max: self.max,
        }
        .to_string()
    }
}

/// Is this row eligible for a batch, given every row's status?
pub fn eligible(row: &Row, status_of: &BTreeMap<&str, (Status, bool)>) -> bool {
    if row.terminal {
        return false;
    }
    match row.status {
        Status::Ready | Status::NeedsRework => true,
        Status::Blocked => row.deps.iter().all(|d| {
            status_of
                .get(d.as_str())
                .is_some_and(|(s, halted)| *s == Status::Done && !halted)
        }),
        Status::InProgress | Status::Verified | Status::Done => false,
    }
}

/// The dependencies on halted work orders that keep an order waiting, as
/// `(order, dependency)`: such an order cannot run until a human clears the
/// dependency. `rows` must be sorted by id.
pub fn halted_dependencies(rows: &[Row]) -> Vec<(&Row, &str)> {
    let halted = |id: &str| {
        rows.binary_search_by(|r| r.id.as_str().cmp(id))
            .is_ok_and(|i| rows[i].terminal)
    };
    rows.iter()
        .filter(|row| !row.terminal && row.status == Status::Blocked)
        .flat_map(|row| {
            row.deps
                .iter()
                .filter(|dep| halted(dep))
                .map(move |dep| (row, dep.as_str()))
        })
        .collect()
}

/// Why `wo` (its row `row`) is not built now, whatever else is chosen: its
/// branch holds work made by hand (with the warning that says so), a
/// shallow history cannot tell whether it landed, or an order in progress
/// or waiting to land claims files it may touch.
fn held_back(
    row: &Row,
    wo: &WorkOrder,
    claims: &[&WorkOrder],
) -> Option<(Deferred, Option<String>)> {
    let deferred = |reason: &str, conflicts_with: Vec<String>| Deferred {
        wo_id: wo.id.clone(),
        reason: reason.into(),
        conflicts_with,
    };
    if let Some(head) = &row.hand_made_branch {
        let warning = format!(
            "{id} is not built: branch {branch} holds work made by hand ({head}); \
             merge it with 'git arbiter merge-back {id}' or drop it with 'git arbiter worktree remove {id}'",
            id = row.id,
            branch = crate::run::worktree::branch_of(&row.id)
        );
        return Some((deferred(HAND_MADE_BRANCH, Vec::new()), Some(warning)));
    }
    if row.may_have_landed_before.is_some() {
        return Some((deferred(SHALLOW_HISTORY, Vec::new()), None));
    }
    let holders: Vec<String> = claims
        .iter()
        .filter(|claim| could_collide(wo, claim))
        .map(|claim| claim.id.clone())
        .collect();
    (!holders.is_empty()).then(|| (deferred(CLAIMED, holders), None))
}

/// Orders that declare no files run alone: the first of them when nothing
/// else is built now (orders held back do not keep it waiting), the rest
/// deferred.
fn add_solo<'o>(
    out: &mut Batch,
    chosen: &mut Vec<&'o WorkOrder>,
    solo: Vec<&'o WorkOrder>,
    max: usize,
) {
    let nothing_else = chosen.is_empty()
        && out
            .deferred
            .iter()
            .all(|d| d.reason == HAND_MADE_BRANCH || d.reason == SHALLOW_HISTORY);
    for (i, wo) in solo.into_iter().enumerate() {
        if nothing_else && i == 0 && max > 0 {
            chosen.push(wo);
        } else {
            out.deferred.push(Deferred {
                wo_id: wo.id.clone(),
                reason: "no_declared_files".into(),
                conflicts_with: Vec::new(),
            });
        }
    }
}

/// Select the batch. `rows` must be sorted by id (as the reconcile table is).
pub fn select(orders: &Orders, rows: &[Row], max: usize) -> Batch {
    let status_of: BTreeMap<&str, (Status, bool)> = rows
        .iter()
        .map(|r| (r.id.as_str(), (r.status, r.terminal)))
        .collect();
    // Orders in progress claim their declared files until they settle (the
    // rows show an order in progress only while a live conductor holds
    // it), and verified ones until they land.
    let claims: Vec<&WorkOrder> = rows
        .iter()
        .filter(|r| matches!(r.status, Status::InProgress | Status::Verified) && !r.terminal)
        .filter_map(|r| orders.get(&r.id))
        .collect();
    let mut out = Batch {
        version: crate::JSON_VERSION,
        max,
        ..Batch::default()
    };
    let mut chosen: Vec<&WorkOrder> = Vec::new();
    let mut solo: Vec<&WorkOrder> = Vec::new();
    for row in rows {
        if !eligible(row, &status_of) {
            continue;
        }
        let Some(wo) = orders.get(&row.id) else {
            continue;
        };
        out.ready += 1;
        if let Some((deferred, warning)) = held_back(row, wo, &claims) {
            out.warnings.extend(warning);
            out.deferred.push(deferred);
            continue;
        }
        if wo.touches_anything() {
            solo.push(wo);
            continue;
        }
        // A full batch defers the rest without comparing them to it: the
        // comparison would only decorate the deferral (see the module doc).
        if chosen.len() >= max {
            out.deferred.push(Deferred {
                wo_id: wo.id.clone(),
                reason: "max_reached".into(),
                conflicts_with: Vec::new(),
            });
            continue;
        }
        let conflicts: Vec<String> = chosen
            .iter()
            .filter(|other| sets_overlap(&wo.files, &other.files))
            .map(|other| other.id.clone())
            .collect();
        if !conflicts.is_empty() {
            out.deferred.push(Deferred {
                wo_id: wo.id.clone(),
                reason: "overlap".into(),
                conflicts_with: conflicts,
            });
        } else {
            chosen.push(wo);
        }
    }
    if let Some(warning) = shallow_warning(rows) {
        out.warnings.push(warning);
    }
    add_solo(&mut out, &mut chosen, solo, max);
    out.deferred.sort_by(|a, b| a.wo_id.cmp(&b.wo_id));
    out.batch = chosen
        .into_iter()
        .map(|wo| Picked {
            wo_id: wo.id.clone(),
            files: wo.file_strings(),
        })
        .collect();
    out
}

/// How to learn whether orders a shallow clone cannot tell about landed.
pub const SHALLOW_HINT: &str = "their records tell ('git fetch origin refs/notes/arbiter:refs/notes/arbiter'), \
     or a history back to the commits that added their files ('git fetch --deepen=<n>', or 'git fetch --unshallow')";

/// The orders a shallow clone cannot tell landed, and the commit its
/// history begins at; `None` when there are none.
pub fn shallow_unknown(rows: &[Row]) -> Option<(&str, Vec<&str>)> {
    let start = rows
        .iter()
        .find_map(|r| r.may_have_landed_before.as_deref())?;
    let ids = rows
        .iter()
        .filter(|r| r.may_have_landed_before.is_some())
        .map(|r| r.id.as_str())
        .collect();
    Some((start, ids))
}

/// One line for all the orders a shallow clone cannot tell landed, if any:
/// what it means and how to find out.
pub fn shallow_warning(rows: &[Row]) -> Option<String> {
    let (start, ids) = shallow_unknown(rows)?;
    Some(format!(
        "this clone is shallow: its history begins at {start}, and {n} order(s) with no record \
         may have landed before it ({list}), so they are not built: {SHALLOW_HINT}",
        start = &start[..start.len().min(12)],
        n = ids.len(),
        list = ids.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::scope::Entry;
    use std::path::PathBuf;

    fn wo(id: &str, files: &[&str], deps: &[&str]) -> WorkOrder {
        WorkOrder {
            id: id.into(),
            title: id.into(),
            path: PathBuf::from(format!("{id}.md")),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            files: files
                .iter()
                .map(|f| Entry::parse(f).expect("valid"))
                .collect(),
            task: String::new(),
            allow_empty: false,
            lines: Default::default(),
        }
    }

    fn row(w: &WorkOrder, status: Status, terminal: bool) -> Row {
        Row {
            id: w.id.clone(),
            title: w.title.clone(),
            state: status.state(terminal),
            status,
            terminal,
            halt_reason: None,
            attempts: 0,
            cap: 3,
            deps: w.deps.clone(),
            checkpoint_before: None,
            checkpoint_after: None,
            last_verdicts: vec![],
            recovery: None,
            hand_made_branch: None,
            claimed_by: None,
            claimed_on: None,
            merged_into: None,
            waiting: None,
            may_have_landed_before: None,
            last_failure: None,
            spent: None,
        }
    }

    fn run(list: Vec<(WorkOrder, Status, bool)>, max: usize) -> Batch {
        let rows: Vec<Row> = list.iter().map(|(w, s, t)| row(w, *s, *t)).collect();
        let orders = Orders::from_list("w".into(), list.into_iter().map(|(w, _, _)| w).collect())
            .expect("valid orders");
        let mut rows = rows;
        rows.sort_by(|a, b| a.id.cmp(&b.id));
        select(&orders, &rows, max)
    }

    fn ids(b: &Batch) -> Vec<&str> {
        b.batch.iter().map(|p| p.wo_id.as_str()).collect()
    }

    #[test]
    fn overlap_pairs_defer_the_later_id() {
        let pairs = [
            ("src/a.rs", "src/a.rs", true),
            ("src/a/**", "src/a/x.rs", true),
            ("src/a", "src/a/x.rs", true),
            ("docs/*.md", "docs/guide.md", true),
            ("src/*/mod.rs", "src/x/**", true),
            ("a/b", "a/bc", false),
            // A glob covers the files it matches, not what is below them.
            ("src/*", "src/a/x.rs", false),
            ("src/*", "src/a", true),
        ];
        for (x, y, overlap) in pairs {
            let b = run(
                vec![
                    (wo("w1", &[x], &[]), Status::Ready, false),
                    (wo("w2", &[y], &[]), Status::Ready, false),
                ],
                8,
            );
            if overlap {
                assert_eq!(ids(&b), ["w1"], "{x} vs {y}");
                assert_eq!(b.deferred[0].reason, "overlap");
                assert_eq!(b.deferred[0].conflicts_with, ["w1"]);
            } else {
                assert_eq!(ids(&b), ["w1", "w2"], "{x} vs {y}");
            }
        }
    }

    #[test]
    fn orders_in_progress_claim_their_files() {
        let orders = vec![
            wo("a", &["FAQ.md"], &[]),
            wo("b", &["FAQ.md"], &[]),
            wo("c", &["other.md"], &[]),
            wo("d", &[], &[]),
        ];
        let mut rows: Vec<Row> = orders
            .iter()
            .map(|w| row(w, Status::Ready, false))
            .collect();
        rows[0].status = Status::InProgress;
        let orders = Orders::from_list("w".into(), orders).expect("orders");
        let b = select(&orders, &rows, 8);
        assert_eq!(ids(&b), ["c"]);
        let claimed: Vec<(&str, &str, Vec<String>)> = b
            .deferred
            .iter()
            .map(|d| {
                (
                    d.wo_id.as_str(),
                    d.reason.as_str(),
                    d.conflicts_with.clone(),
                )
            })
            .collect();
        assert_eq!(
            claimed,
            [
                ("b", CLAIMED, vec!["a".to_owned()]),
                ("d", CLAIMED, vec!["a".to_owned()]),
            ],
            "an order that may touch anything waits for every claim"
        );
    }

    #[test]
    fn hand_made_work_is_not_built_and_blocks_nothing() {
        let orders = vec![
            wo("a", &[], &[]),
            wo("b", &["x"], &[]),
            wo("c", &["x"], &[]),
        ];
        let mut rows: Vec<Row> = orders
            .iter()
            .map(|w| row(w, Status::Ready, false))
            .collect();
        rows[1].hand_made_branch = Some("f00".into());
        let orders = Orders::from_list("w".into(), orders).expect("orders");
        let b = select(&orders, &rows, 8);
        // c's files are free (b is not built); a still waits for c.
        assert_eq!(ids(&b), ["c"]);
        assert_eq!(b.deferred[0].wo_id, "a");
        assert_eq!(b.deferred[1].wo_id, "b");
        assert_eq!(b.deferred[1].reason, HAND_MADE_BRANCH);
        assert!(b.warnings[0].contains("arbiter/b holds work made by hand"));
        rows[2].status = Status::Done;
        let b = select(&orders, &rows, 8);
        assert_eq!(ids(&b), ["a"], "alone once nothing else can run");
    }

    #[test]
    fn orders_a_shallow_clone_cannot_tell_about_are_not_built_and_said_once() {
        let orders = vec![
            wo("a", &[], &[]),
            wo("b", &["x"], &[]),
            wo("c", &["y"], &[]),
            wo("d", &["z"], &[]),
        ];
        let mut rows: Vec<Row> = orders
            .iter()
            .map(|w| row(w, Status::Ready, false))
            .collect();
        rows[1].may_have_landed_before = Some("c0ffee".repeat(7));
        rows[3].may_have_landed_before = Some("c0ffee".repeat(7));
        let orders = Orders::from_list("w".into(), orders).expect("orders");
        let b = select(&orders, &rows, 8);
        assert_eq!(ids(&b), ["c"]);
        let shallow: Vec<&str> = b
            .deferred
            .iter()
            .filter(|d| d.reason == SHALLOW_HISTORY)
            .map(|d| d.wo_id.as_str())
            .collect();
        assert_eq!(shallow, ["b", "d"]);
        assert_eq!(b.warnings.len(), 1, "{:?}", b.warnings);
        assert!(b.warnings[0].contains("begins at c0ffeec0ffee"));
        assert!(b.warnings[0].contains("(b, d)"));
        rows[2].status = Status::Done;
        let b = select(&orders, &rows, 8);
        assert_eq!(ids(&b), ["a"], "alone once nothing else can run");
    }

    #[test]
    fn no_files_runs_alone_and_last() {
        let b = run(
            vec![
                (wo("a", &[], &[]), Status::Ready, false),
                (wo("b", &["x"], &[]), Status::Ready, false),
            ],
            8,
        );
        assert_eq!(ids(&b), ["b"]);
        assert_eq!(b.deferred[0].reason, "no_declared_files");
        let b = run(
            vec![
                (wo("a", &[], &[]), Status::Ready, false),
                (wo("c", &[], &[]), Status::Ready, false),
            ],
            8,
        );
        assert_eq!(ids(&b), ["a"]);
        assert_eq!(b.deferred.len(), 1);
    }

    #[test]
    fn eligibility() {
        let b = run(
            vec![
                (wo("a", &["a"], &[]), Status::Done, false),
                (wo("b", &["b"], &["a"]), Status::Blocked, false),
                (wo("c", &["c"], &["d"]), Status::Blocked, false),
                (wo("d", &["d"], &[]), Status::Ready, true),
                (wo("e", &["e"], &[]), Status::NeedsRework, false),
                (wo("f", &["f"], &[]), Status::InProgress, false),
            ],
            8,
        );
        assert_eq!(ids(&b), ["b", "e"]);
        assert_eq!(b.ready, 2);
        assert_eq!(
            b.summary_line(),
            "arbiter batch ready=2 batch=2 deferred=0 max=8"
        );
    }

    #[test]
    fn halted_dependencies_keep_orders_waiting() {
        let c = wo("c", &["c"], &["d"]);
        let d = wo("d", &["d"], &[]);
        let e = wo("e", &["e"], &["d"]);
        let rows = [
            row(&c, Status::Blocked, false),
            row(&d, Status::Ready, true),
            // Halted itself: waiting on `d` is not what keeps it.
            row(&e, Status::Blocked, true),
        ];
        let found: Vec<(&str, &str)> = halted_dependencies(&rows)
            .into_iter()
            .map(|(r, dep)| (r.id.as_str(), dep))
            .collect();
        assert_eq!(found, [("c", "d")]);
    }

    #[test]
    fn max_is_respected() {
        let list = (0..5)
            .map(|i| {
                (
                    wo(&format!("w{i}"), &[&format!("f{i}")], &[]),
                    Status::Ready,
                    false,
                )
            })
            .collect();
        let b = run(list, 2);
        assert_eq!(ids(&b), ["w0", "w1"]);
        assert!(b.deferred.iter().all(|d| d.reason == "max_reached"));
    }

    proptest::proptest! {
        #[test]
        fn batches_are_disjoint_and_bounded(
            specs in proptest::collection::vec(
                proptest::collection::vec("(src|docs|lib)(/(a|b|c|\\*|\\*\\*|x\\.rs|\\*\\.md)){0,3}", 0..4),
                1..14,
            ),
            max in 0usize..6,
        ) {
            let list: Vec<_> = specs.iter().enumerate().map(|(i, files)| {
                let files: Vec<&str> = files.iter().map(String::as_str).collect();
                (wo(&format!("w{i:02}"), &files, &[]), Status::Ready, false)
            }).collect();
            let entries: Vec<Vec<Entry>> = specs.iter().map(|f| f.iter().map(|s| Entry::parse(s).expect("valid")).collect()).collect();
            let b = run(list, max);
            proptest::prop_assert!(b.batch.len() <= max);
            for (i, x) in b.batch.iter().enumerate() {
                for y in &b.batch[i + 1..] {
                    let ex = &entries[x.wo_id[1..].parse::<usize>().expect("index")];
                    let ey = &entries[y.wo_id[1..].parse::<usize>().expect("index")];
                    proptest::prop_assert!(!ex.iter().any(|a| ey.iter().any(|b| a.overlaps(b))));
                    proptest::prop_assert!(!ex.is_empty() && !ey.is_empty(), "a solo WO shares a batch");
                }
            }
            let again = run(specs.iter().enumerate().map(|(i, files)| {
                let files: Vec<&str> = files.iter().map(String::as_str).collect();
                (wo(&format!("w{i:02}"), &files, &[]), Status::Ready, false)
            }).collect(), max);
            proptest::prop_assert_eq!(again, b);
        }
    }
}
