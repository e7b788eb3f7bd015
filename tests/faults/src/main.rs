//! `locktest`: the safety suite's orchestrator, Rust worker and checker (README.md in this directory).

mod checker;
mod clock;
mod history;
mod nemesis;
mod orchestrator;
mod proxy;
mod referee;
mod sentinel;
mod servers;
mod worker;

use clap::{Parser, Subcommand};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "locktest", about = "Jepsen-style safety tests of fencelock")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// One run against one backend, in a private network namespace (needs root); exits 1 on a failed assertion.
    Run(orchestrator::RunArgs),
    /// Runs one client worker (JSON-lines events on stdout; stops at stdin EOF).
    Worker(worker::WorkerArgs),
    /// Checks a recorded history and prints the figures; exits 1 on a failed assertion.
    Check {
        history: PathBuf,
        /// Also require violations without fencing (the canary profile).
        #[arg(long)]
        canary: bool,
        /// The run's build had a broken register: require stale writes accepted by the SDK fence instead of none.
        #[arg(long)]
        broken_fence: bool,
        /// The run skewed a majority (`run --skew-majority`): require a double grant.
        #[arg(long)]
        double_grant: bool,
    },
    /// Prints the Markdown table of the runs in the given directories (their report.json).
    Table { runs: Vec<PathBuf> },
}

/// Set in the re-executed child that already is in its own network namespace.
const IN_NETNS: &str = "LOCKTEST_IN_NETNS";

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(args) => {
            if std::env::var_os(IN_NETNS).is_none() {
                // Everything (servers, proxies, referee, workers) lives in a network namespace of its own with only
                // loopback up: nothing here can reach, or be reached from, the machine's network.
                let err = std::process::Command::new("unshare")
                    .arg("-n")
                    .arg("--")
                    .arg(std::env::current_exe().expect("own path"))
                    .args(std::env::args_os().skip(1))
                    .env(IN_NETNS, "1")
                    .exec();
                eprintln!("locktest: unshare -n (needs root): {err}");
                return ExitCode::from(2);
            }
            let lo = std::process::Command::new("ip").args(["link", "set", "lo", "up"]).status();
            if !lo.is_ok_and(|s| s.success()) {
                eprintln!("locktest: ip link set lo up failed in the private namespace");
                return ExitCode::from(2);
            }
            // The orchestrator and its referee must not be the ones delayed (SAFETY-TESTING.md §7); the children
            // go back to 0. Best effort: without the privilege it stays as it is.
            // SAFETY: adjusts this process's own priority.
            unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, -5) };
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            match rt.block_on(orchestrator::run(args)) {
                Ok(None) => ExitCode::SUCCESS, // skipped: the backend lacks the workload's primitive (said why)
                Ok(Some(r)) if r.failures.is_empty() => ExitCode::SUCCESS,
                Ok(Some(_)) => ExitCode::FAILURE,
                Err(e) => {
                    eprintln!("locktest run: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Cmd::Worker(args) => {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
            match rt.expect("tokio runtime").block_on(worker::run(args)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("locktest worker: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Cmd::Check { history, canary, broken_fence, double_grant } => match history::read(&history) {
            Ok(h) => {
                let r = checker::check(&h, checker::Expect { canary, broken_fence, double_grant });
                print!("{}", checker::render(&r));
                if r.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
            }
            Err(e) => {
                eprintln!("locktest check: {e}");
                ExitCode::from(2)
            }
        },
        Cmd::Table { runs } => {
            let mut reports = Vec::new();
            for dir in runs {
                let path = dir.join("report.json");
                match std::fs::read(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|b| serde_json::from_slice::<checker::Report>(&b).map_err(|e| e.to_string()))
                {
                    Ok(r) => reports.push(r),
                    Err(e) => eprintln!("locktest table: {}: {e}", path.display()),
                }
            }
            print!("{}", checker::table(&reports));
            ExitCode::SUCCESS
        }
    }
}
