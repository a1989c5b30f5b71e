use std::io::Read;

use clap::Args;
use git_arbiter::state::select::{self, Candidate};
use git_arbiter::sys::error::InputError;
use git_arbiter::{Error, ExitCode};
use serde::{Deserialize, Serialize};

use super::{json, out};

/// Choose the best of N candidates read from stdin (the selection kernel).
///
/// Reads `{"version":1,"candidates":[{"instance":0,"passed":true,"score":7,
/// "finished_at":123,"verdict":"passed"},…]}`. Eligible: passed with a score
/// (at least `--min-score`); the highest score wins, the earliest
/// `finished_at` breaks ties. Prints the winner and the fallback order.
///
/// Exit: 0 a winner, 1 no winner, 2 bad input.
#[derive(Args, Debug)]
pub struct PickArgs {
    /// Nothing below this score wins
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    min_score: Option<i64>,
    /// Print `{"version":2,"winner":<instance>|null,"order":[…]}`
    #[arg(long)]
    json: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    version: u32,
    candidates: Vec<Candidate>,
}

#[derive(Serialize)]
struct Output {
    version: u32,
    winner: Option<u32>,
    order: Vec<u32>,
}

pub fn cmd_pick(args: PickArgs) -> Result<ExitCode, Error> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| InputError::new(format!("cannot read stdin: {e}")))?;
    let input: Input = serde_json::from_str(&text).map_err(|e| {
        InputError::new(format!("stdin is not a candidate list: {e}")).hint(
            r#"expected {"version":1,"candidates":[{"instance":0,"passed":true,"score":7,"finished_at":1,"verdict":"passed"}]}"#,
        )
    })?;
    if input.version != 1 {
        return Err(InputError::new(format!(
            "unsupported candidate list version {}",
            input.version
        ))
        .hint("write \"version\":1")
        .into());
    }
    let order: Vec<u32> = select::order(&input.candidates, args.min_score)
        .into_iter()
        .map(|i| input.candidates[i].instance)
        .collect();
    let winner = order.first().copied();
    if args.json {
        out(&json(&Output {
            version: git_arbiter::JSON_VERSION,
            winner,
            order: order.clone(),
        }));
    } else {
        match winner {
            Some(w) => out(&format!("{w}\n")),
            None => out("no winner\n"),
        }
    }
    Ok(if winner.is_some() {
        ExitCode::Success
    } else {
        ExitCode::Escalation
    })
}
