//! `fencelock status NAME [--watch]`: who holds a lock, for how long, the last fencing token handed out and how many
//! wait; with `--watch`, refreshed until interrupted.

use std::fmt::Write as _;
use std::io::{IsTerminal as _, Write as _};
use std::time::Duration;

use fencelock::{Client, LockInfo};
use tokio::time::MissedTickBehavior;

use crate::args::StatusArgs;
use crate::exit::{self, Failure};
use crate::signals::Signals;

/// Clears a terminal and moves the cursor home, so each refresh redraws in place.
const CLEAR: &str = "\x1b[2J\x1b[H";

pub async fn status(args: StatusArgs) -> Result<i32, Failure> {
    let client = Client::connect(&args.backend.url()).await?;
    let result = if args.watch { watch(&client, &args).await } else { once(&client, &args.name).await };
    client.close().await;
    result
}

async fn once(client: &Client, name: &str) -> Result<i32, Failure> {
    let info = client.inspect(name).await?;
    print_stdout(&render(name, &info))?;
    Ok(0)
}

/// Every `--interval` until SIGINT, SIGTERM or SIGHUP (then exit 0: the normal end of a watch). A failed read is
/// shown and the watch goes on, so it outlives a backend restart.
async fn watch(client: &Client, args: &StatusArgs) -> Result<i32, Failure> {
    let mut signals =
        Signals::install().map_err(|e| Failure::new(exit::FAILURE, format!("cannot install signal handlers: {e}")))?;
    let terminal = std::io::stdout().is_terminal();
    let mut ticks = tokio::time::interval(args.interval);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = signals.recv() => return Ok(0),
            _ = ticks.tick() => {}
        }
        let text = match client.inspect(&args.name).await {
            Ok(info) => render(&args.name, &info),
            Err(e) => format!("name: {}\nerror: {e}\n", args.name),
        };
        if terminal {
            print_stdout(&format!("{CLEAR}{text}"))?;
        } else {
            print_stdout(&one_line(&text))?;
        }
    }
}

/// A refresh as one line, its `key: value` fields separated by tabs (for scripts reading a pipe).
fn one_line(text: &str) -> String {
    let mut line = text.lines().collect::<Vec<_>>().join("\t");
    line.push('\n');
    line
}

/// `name:`, `held by:`, `remaining:` (only while held), `last token:` and `waiters:` lines.
fn render(name: &str, info: &LockInfo) -> String {
    let mut out = format!("name: {name}\n");
    match (&info.holder, info.remaining) {
        (Some(holder), remaining) => {
            let _ = writeln!(out, "held by: {holder}");
            let _ = writeln!(out, "remaining: {:.1}s", remaining.unwrap_or(Duration::ZERO).as_secs_f64());
        }
        (None, _) => out.push_str("held by: nobody\n"),
    }
    let _ = match info.last_token {
        Some(token) => writeln!(out, "last token: {token}"),
        None => writeln!(out, "last token: none"),
    };
    let _ = match info.waiters {
        Some(n) => writeln!(out, "waiters: {n}"),
        None => writeln!(out, "waiters: unknown"),
    };
    out
}

/// Prints `text`, failing cleanly (not panicking like `print!`) if stdout is closed.
pub fn print_stdout(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::new(exit::FAILURE, format!("cannot write to stdout: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::LockOptions;

    #[tokio::test]
    async fn held_and_free_locks_read_as_documented() {
        let client = Client::connect("memory://cli-status").await.unwrap();
        let never = client.inspect("never").await.unwrap();
        assert_eq!(render("never", &never), "name: never\nheld by: nobody\nlast token: none\nwaiters: unknown\n");

        let lease = client.lock("x", &LockOptions::default().ttl(Duration::from_secs(20))).await.unwrap();
        let held = render("x", &client.inspect("x").await.unwrap());
        let lines: Vec<&str> = held.lines().collect();
        assert_eq!(lines[0], "name: x");
        assert_eq!(lines[1], format!("held by: {}", lease.holder()));
        assert!(lines[2].starts_with("remaining: ") && lines[2].ends_with('s'), "{held}");
        assert_eq!(lines[3], format!("last token: {}", lease.fence()));

        lease.release().await.unwrap();
        let free = render("x", &client.inspect("x").await.unwrap());
        assert_eq!(free, format!("name: x\nheld by: nobody\nlast token: {}\nwaiters: unknown\n", lease.fence()));
        assert_eq!(
            one_line(&free),
            format!("name: x\theld by: nobody\tlast token: {}\twaiters: unknown\n", lease.fence())
        );
    }
}
