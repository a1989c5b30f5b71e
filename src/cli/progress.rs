//! How a round's progress reaches the user: a live view on a TTY (one line per
//! running work order with its phase and elapsed time, and the slots in use),
//! compact `arbiter <kernel> key=value …` lines on stderr otherwise.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use git_arbiter::progress::Progress;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Quote a value when it would break `key=value` splitting.
pub fn field(value: &str) -> String {
    if value.is_empty() || value.contains(|c: char| c.is_whitespace() || c == '"' || c == '=') {
        format!("{value:?}")
    } else {
        value.to_owned()
    }
}

pub fn line(kernel: &str, fields: &[(&str, String)]) -> String {
    let mut s = format!("arbiter {kernel}");
    for (k, v) in fields {
        s.push_str(&format!(" {k}={}", field(v)));
    }
    s
}

pub struct Lines;

impl Progress for Lines {
    fn event(&self, kernel: &str, fields: &[(&str, String)]) {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "{}", line(kernel, fields));
    }
    fn phase(&self, _wo: &str, _phase: &str) {}
    fn finished(&self, _wo: &str) {}
}

pub struct Live {
    multi: MultiProgress,
    bars: Mutex<BTreeMap<String, ProgressBar>>,
    /// The top line: builds running here and the machine-wide cap.
    header: ProgressBar,
}

impl Live {
    fn new() -> Live {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let header = multi.add(ProgressBar::new_spinner());
        header.set_style(ProgressStyle::with_template("{msg}").expect("static template is valid"));
        Live {
            multi,
            bars: Mutex::new(BTreeMap::new()),
            header,
        }
    }
}

impl Progress for Live {
    fn event(&self, kernel: &str, fields: &[(&str, String)]) {
        // Slot and per-phase chatter is what the live lines already show.
        if kernel == "slot" {
            if let Some((_, wo)) = fields.iter().find(|(k, _)| *k == "wo") {
                if let Some(bar) = self.bars.lock().expect("progress lock").get(wo) {
                    let waiting = fields
                        .iter()
                        .find(|(k, _)| *k == "waiting")
                        .map(|(_, v)| v.as_str())
                        .unwrap_or("");
                    bar.set_message(format!("{wo}  waiting for a slot ({waiting})"));
                }
            }
            return;
        }
        if kernel == "build" {
            if let Some((_, slots)) = fields.iter().find(|(k, _)| *k == "slots") {
                self.multi.set_move_cursor(false);
                let wo = fields
                    .iter()
                    .find(|(k, _)| *k == "wo")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default();
                if let Some(bar) = self.bars.lock().expect("progress lock").get(&wo) {
                    bar.set_prefix(format!("slots {slots}"));
                }
            }
        }
        let _ = self.multi.println(line(kernel, fields));
    }

    fn phase(&self, wo: &str, phase: &str) {
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
        self.header.set_message(format!(
            "slots held by this round: {in_use}/{cap} (machine-wide cap)"
        ));
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
        Box::new(Live::new())
    } else {
        Box::new(Lines)
    }
}
