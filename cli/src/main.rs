//! `fencelock`: run a command while holding a distributed lock (`run`) or leading an election (`elect`), inspect a
//! lock (`status`) or an election (`leader`), clear a stuck lock (`release --force`). See `fencelock run --help` for the exit statuses.

mod args;
mod child;
mod elect;
mod exit;
mod release;
mod run;
mod signals;
mod status;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

// One thread: CMD's parent-death signal is tied to the thread that spawns it, and this one lives as long as we do.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::run(args).await,
        Command::Status(args) => status::status(args).await,
        Command::Release(args) => release::release(args).await,
        Command::Elect(args) => elect::elect(args).await,
        Command::Leader(args) => elect::leader(args).await,
    };
    let code = result.unwrap_or_else(|failure| {
        eprintln!("{failure}");
        failure.code
    });
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}
