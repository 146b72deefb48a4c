//! `core-agent-fuzz <target|all> [--seconds N] [--seed S]`: runs one fuzz
//! target, or every target one after the other, for N seconds each
//! (default 60), and prints how many inputs each tried. Exits 1 on the
//! first failure, with the input saved in the temporary directory.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Duration;

use core_agent_fuzz::{run, targets};

fn main() -> ExitCode {
    let mut seconds: u64 = 60;
    let mut seed: u64 = 0x5eed_cafe;
    let mut which: Option<String> = None;
    let mut args = std::env::args().skip(1);
    let names: Vec<&str> = targets::all().iter().map(|t| t.name()).collect();
    let usage = format!(
        "usage: core-agent-fuzz <{}|all> [--seconds N] [--seed S]",
        names.join("|")
    );
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok());
        match arg.as_str() {
            "--seconds" => match number(args.next()) {
                Some(n) => seconds = n,
                None => {
                    eprintln!("--seconds needs a whole number\n{usage}");
                    return ExitCode::from(2);
                }
            },
            "--seed" => match number(args.next()) {
                Some(n) => seed = n,
                None => {
                    eprintln!("--seed needs a whole number\n{usage}");
                    return ExitCode::from(2);
                }
            },
            _ if which.is_none() => which = Some(arg),
            _ => {
                eprintln!("unexpected argument `{arg}`\n{usage}");
                return ExitCode::from(2);
            }
        }
    }
    let selected = match which.as_deref() {
        Some("all") => targets::all(),
        Some(name) => match targets::by_name(name) {
            Some(t) => vec![t],
            None => {
                eprintln!("no fuzz target named `{name}`\n{usage}");
                return ExitCode::from(2);
            }
        },
        None => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    for mut target in selected {
        match run(target.as_mut(), Duration::from_secs(seconds), seed) {
            Ok(outcome) => {
                let stats = target.stats();
                let stats = if stats.is_empty() {
                    String::new()
                } else {
                    format!(" ({stats})")
                };
                println!(
                    "fuzz {}: {} inputs in {:.1} s, no failure{stats}",
                    target.name(),
                    outcome.inputs,
                    outcome.elapsed.as_secs_f64()
                );
            }
            Err(failure) => {
                let saved = failure
                    .saved
                    .map(|p| format!("; input saved to {}", p.display()))
                    .unwrap_or_default();
                eprintln!(
                    "fuzz {}: FAILED after {} inputs: {}{saved}\ninput: {:?}",
                    target.name(),
                    failure.after,
                    failure.why,
                    String::from_utf8_lossy(&failure.input)
                );
                return ExitCode::FAILURE;
            }
        }
    }
    ExitCode::SUCCESS
}
