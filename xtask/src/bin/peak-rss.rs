//! `peak-rss RUNS PROGRAM [ARGS…]`, run by `cargo xtask bench`: runs `PROGRAM ARGS` `RUNS`
//! times in this process's environment and directory, standard streams to `/dev/null`, and
//! prints the largest peak resident set of those runs in KiB (`getrusage(RUSAGE_CHILDREN)`).
//!
//! It is a binary of its own, and a small one, because Linux counts the memory of the process
//! that starts a program into the program's peak: until `exec` the two are one process (or
//! one copy of it). Started from the xtask binary, a debug build of the whole workspace,
//! every run would measure at least the xtask binary itself.

use std::process::{Command, ExitCode, Stdio};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(runs), Some(program)) = (
        args.first().and_then(|n| n.parse::<usize>().ok()),
        args.get(1),
    ) else {
        eprintln!("usage: peak-rss RUNS PROGRAM [ARGS…]");
        return ExitCode::from(2);
    };
    for _ in 0..runs {
        let status = Command::new(program)
            .args(&args[2..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match status {
            Ok(status) if status.success() => {}
            Ok(status) => {
                eprintln!("`{program} {}` failed ({status})", args[2..].join(" "));
                return ExitCode::FAILURE;
            }
            Err(err) => {
                eprintln!("cannot run {program}: {err}");
                return ExitCode::FAILURE;
            }
        }
    }
    match nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN) {
        // Linux gives kibibytes.
        Ok(usage) => {
            println!("{}", usage.max_rss());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("getrusage: {err}");
            ExitCode::FAILURE
        }
    }
}
