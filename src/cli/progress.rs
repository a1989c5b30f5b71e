//! How a round's progress reaches the user: a live view on a TTY (one line per
//! running work order with its phase and elapsed time, and the slots in use),
//! compact `arbiter <kernel> key=value …` lines on stderr otherwise.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use git_arbiter::run::progress::{Event, Phase, Progress};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Lines;

impl Progress for Lines {
    fn event(&self, event: &Event) {
        // One write per line: stderr is unbuffered, and an event formats
        // in pieces.
        let line = format!("{event}\n");
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
    fn phase(&self, _wo: &str, _phase: Phase) {}
    fn finished(&self, _wo: &str) {}
}

pub struct Live {
    multi: MultiProgress,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
    /// The top line: builds running here and the machine-wide cap, and
    /// what the run's builders reported they cost so far.
    header: ProgressBar,
    /// The top line's parts: the slots, and the cost once one was reported.
    top: Mutex<(String, Option<String>)>,
}

impl Live {
    fn new(target: ProgressDrawTarget) -> Live {
        let multi = MultiProgress::with_draw_target(target);
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(ProgressStyle::with_template("{msg}").expect("static template is valid"));
        Live {
            multi,
            bars: Mutex::new(BTreeMap::new()),
            header,
            top: Mutex::new((String::new(), None)),
        }
    }

    /// Change a part of the top line and draw it again.
    fn set_top(&self, change: impl FnOnce(&mut (String, Option<String>))) {
        let mut top = self.top.lock().expect("progress lock");
        change(&mut top);
        let line = match &top.1 {
            Some(cost) if top.0.is_empty() => format!("cost so far: {cost}"),
            Some(cost) => format!("{}; cost so far: {cost}", top.0),
            None => top.0.clone(),
        };
        self.header.set_message(line);
    }
}

impl Progress for Live {
    fn event(&self, event: &Event) {
        match event {
            // Waiting for a slot is what the order's live line already shows.
            Event::SlotWait {
                wo,
                cap,
                held,
                ahead,
            } => {
                if let Some(bar) = self.bars.lock().expect("progress lock").get(wo) {
                    bar.set_message(format!(
                        "{wo}  waiting for a slot ({held}/{cap} held, {ahead} ahead)"
                    ));
                }
                return;
            }
            Event::Cost { total, .. } => {
                let cost = total.describe();
                self.set_top(|top| top.1 = Some(cost));
            }
            Event::BuildStarted {
                wo, in_use, cap, ..
            } => {
                self.multi.set_move_cursor(false);
                if let Some(bar) = self.bars.lock().expect("progress lock").get(wo) {
                    bar.set_prefix(format!("slots {in_use}/{cap}"));
                }
            }
            _ => {}
        }
        let _ = self.multi.println(event.to_string());
    }

    fn phase(&self, wo: &str, phase: Phase) {
        let mut bars = self.bars.lock().expect("progress lock");
        let bar = bars.entry(wo.to_owned()).or_insert_with(|| {
            let bar = self.multi.add(ProgressBar::new_spinner());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg}  {elapsed}")
                    .expect("static template is valid"),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        bar.set_message(format!("{wo}  {phase}"));
    }

    fn slots(&self, in_use: usize, cap: u32) {
        let line = format!("slots held by this round: {in_use}/{cap} (machine-wide cap)");
        self.set_top(|top| top.0 = line);
    }

    fn finished(&self, wo: &str) {
        if let Some(bar) = self.bars.lock().expect("progress lock").remove(wo) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
    }
}

/// The live view on a terminal, plain lines otherwise.
pub fn for_stderr() -> Box<dyn Progress> {
    if std::io::stderr().is_terminal() && std::env::var_os("TERM").is_some_and(|t| t != "dumb") {
        Box::new(Live::new(ProgressDrawTarget::stderr()))
    } else {
        Box::new(Lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git_arbiter::run::exec::Exit;

    /// A live view drawing nowhere: what it shows is read back from its bars.
    fn live() -> Live {
        Live::new(ProgressDrawTarget::hidden())
    }

    /// `wo` waits behind `ahead` others for one of two slots, both held.
    fn waiting(wo: &str, ahead: u32) -> Event {
        Event::SlotWait {
            wo: wo.into(),
            cap: 2,
            held: 2,
            ahead,
        }
    }

    fn message(live: &Live, wo: &str) -> Option<String> {
        let bars = live.bars.lock().expect("progress lock");
        bars.get(wo).map(|bar| bar.message())
    }

    #[test]
    fn waiting_for_a_slot_shows_on_the_orders_line() {
        let live = live();
        live.phase("wo-a", Phase::Slot);
        live.event(&waiting("wo-a", 1));
        assert_eq!(
            message(&live, "wo-a").as_deref(),
            Some("wo-a  waiting for a slot (2/2 held, 1 ahead)")
        );
        // An order with no line yet gets none from waiting alone.
        live.event(&waiting("wo-b", 2));
        assert_eq!(message(&live, "wo-b"), None);
    }

    #[test]
    fn a_started_build_names_its_slots_and_the_phase_follows() {
        let live = live();
        live.phase("wo-a", Phase::Slot);
        live.event(&Event::BuildStarted {
            wo: "wo-a".into(),
            attempt: 1,
            in_use: 1,
            cap: 2,
        });
        live.phase("wo-a", Phase::Build);
        let bars = live.bars.lock().expect("progress lock");
        let bar = bars.get("wo-a").expect("wo-a has a line");
        assert_eq!(bar.prefix(), "slots 1/2");
        assert_eq!(bar.message(), "wo-a  build");
    }

    #[test]
    fn the_top_line_shows_the_cost_so_far_once_one_is_reported() {
        use git_arbiter::state::cost::Spent;
        let live = live();
        live.slots(1, 2);
        let slots = "slots held by this round: 1/2 (machine-wide cap)";
        assert_eq!(live.header.message(), slots);
        let reported = |usd: f64| Spent {
            cost_usd: Some(usd),
            ..Spent::default()
        };
        live.event(&Event::Cost {
            wo: "wo-a".into(),
            attempt: 1,
            spent: reported(0.25),
            total: reported(0.75),
        });
        assert_eq!(
            live.header.message(),
            format!("{slots}; cost so far: $0.75")
        );
        live.slots(0, 2);
        assert_eq!(
            live.header.message(),
            "slots held by this round: 0/2 (machine-wide cap); cost so far: $0.75"
        );
    }

    #[test]
    fn other_events_leave_the_lines_alone_and_a_finished_order_goes() {
        let live = live();
        live.phase(
            "wo-a",
            Phase::Check(git_arbiter::run::progress::Check::Gate),
        );
        live.event(&Event::Checked {
            check: git_arbiter::run::progress::Check::Gate,
            wo: "wo-a".into(),
            command: "make test".into(),
            result: Exit::Code(0),
        });
        live.event(&Event::Queued {
            wo: "wo-a".into(),
            position: 1,
        });
        assert_eq!(message(&live, "wo-a").as_deref(), Some("wo-a  gate"));
        live.finished("wo-a");
        assert_eq!(message(&live, "wo-a"), None);
    }
}
