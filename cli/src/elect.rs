//! `fencelock elect NAME [--value V] [--again] -- CMD…`: campaign in election NAME, run CMD while leader with its
//! term in `FENCELOCK_TERM`, resign when it ends. A lost leadership stops CMD (SIGTERM) and exits 75; with `--again`
//! the run campaigns anew instead, and after CMD ends, so a standby takes over whenever the leader goes.
//! `fencelock leader NAME` prints the leader's value and term.

use fencelock::{Client, ErrorKind, LockOptions};

use crate::args::{ElectArgs, LeaderArgs};
use crate::child::{self, HoldEnv};
use crate::exit::{self, Failure};
use crate::run::{Ended, Progress, owner_id, settle_cancelled, supervise};
use crate::signals::Signals;

pub async fn elect(args: ElectArgs) -> Result<i32, Failure> {
    // Before connecting, so that a signal while campaigning is ours to handle.
    let mut signals =
        Signals::install().map_err(|e| Failure::new(exit::FAILURE, format!("cannot handle signals: {e}")))?;
    let client = Client::connect(&args.backend.url()).await?;
    let result = lead(&client, &args, &mut signals).await;
    client.close().await;
    result
}

/// Campaigns, runs CMD as leader, and with `--again` goes on doing so until a signal ends it.
async fn lead(client: &Client, args: &ElectArgs, signals: &mut Signals) -> Result<i32, Failure> {
    let progress = Progress(args.verbose);
    let name = args.name.as_str();
    let election = client.election(name);
    let value = args.value.clone().unwrap_or_else(owner_id);
    let opts = LockOptions::default().ttl(args.ttl).owner(owner_id());
    let opts = match args.timeout {
        Some(t) => opts.timeout(t),
        None => opts.wait_forever(),
    };
    loop {
        progress.say(format_args!("campaigning in election {name:?} as {value:?}"));
        let leadership = tokio::select! {
            won = election.campaign(value.as_bytes(), &opts) => match won {
                Ok(leadership) => leadership,
                Err(e) if e.kind() == ErrorKind::Timeout => return Err(Failure::new(
                    exit::TIMED_OUT,
                    format!(
                        "timed out after {}s campaigning in election {name:?} on {}",
                        args.timeout.unwrap_or_default().as_secs_f64(),
                        client.url()
                    ),
                )),
                Err(e) => return Err(e.into()),
            },
            signo = signals.recv() => {
                settle_cancelled(client, name).await;
                progress.say(format_args!("signal {signo} while campaigning in election {name:?}; gave up"));
                return Ok(exit::signalled(signo));
            }
        };
        let term = leadership.term();
        progress.say(format_args!("leading election {name:?} with term {term}"));
        let cmd = match child::spawn(&args.command, name, term, HoldEnv { slot: None, term: Some(term) }) {
            Ok(cmd) => cmd,
            Err(failure) => {
                let _ = leadership.resign().await;
                return Err(failure);
            }
        };
        let ended = supervise(cmd, leadership.lease(), signals).await;
        let resigned = leadership.resign().await;
        let Ended { status, lost, signalled } = ended?;
        let code = child::exit_code(status);
        let lost =
            lost || resigned.as_ref().is_err_and(|e| matches!(e.kind(), ErrorKind::LockLost | ErrorKind::NotHeld));
        if let Some(signo) = signalled {
            // A signal we passed on ends the run, --again or not: it was meant for us both.
            progress.say(format_args!("signal {signo} while leading election {name:?}; resigned"));
            return Ok(code);
        }
        match (lost, args.again) {
            (true, true) => progress.say(format_args!("lost election {name:?} (term {term}); campaigning again")),
            (true, false) => {
                return Err(Failure::new(
                    exit::LOST,
                    format!(
                        "lost the leadership of election {name:?} (term {term}) while the command ran; exit status {code}"
                    ),
                ));
            }
            (false, true) => progress.say(format_args!("the command ended with {code}; campaigning again")),
            (false, false) => {
                progress.say(format_args!("resigned from election {name:?}"));
                return Ok(code);
            }
        }
    }
}

/// `fencelock leader NAME`: the leader's value and term, tab-separated; exit 3 if nobody leads.
pub async fn leader(args: LeaderArgs) -> Result<i32, Failure> {
    let client = Client::connect(&args.backend.url()).await?;
    let leader = client.election(&args.name).leader().await;
    client.close().await;
    match leader? {
        Some(l) => {
            println!("{}\t{}", String::from_utf8_lossy(&l.value), l.term);
            Ok(0)
        }
        None => Err(Failure::new(exit::NO_LEADER, format!("nobody leads election {:?}", args.name))),
    }
}
