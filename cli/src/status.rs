//! `fencelock status NAME`: who holds a lock, for how long, and the last fencing token handed out.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::Duration;

use fencelock::{Client, LockInfo};

use crate::args::StatusArgs;
use crate::exit::{self, Failure};

pub async fn status(args: StatusArgs) -> Result<i32, Failure> {
    let client = Client::connect(&args.backend.url()).await?;
    let info = client.inspect(&args.name).await;
    client.close().await;
    print_stdout(&render(&args.name, &info?))?;
    Ok(0)
}

/// `name:`, `held by:`, `remaining:` (only while held) and `last token:` lines.
fn render(name: &str, info: &LockInfo) -> String {
    let mut out = format!("name: {name}\n");
    match (&info.holder, info.remaining) {
        (Some(holder), remaining) => {
            let _ = writeln!(out, "held by: {holder}");
            let _ = writeln!(out, "remaining: {:.1}s", remaining.unwrap_or(Duration::ZERO).as_secs_f64());
        }
        (None, _) => out.push_str("held by: nobody\n"),
    }
    match info.last_token {
        Some(token) => writeln!(out, "last token: {token}"),
        None => writeln!(out, "last token: none"),
    }
    .expect("writing to a String cannot fail");
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
        assert_eq!(render("never", &never), "name: never\nheld by: nobody\nlast token: none\n");

        let lease = client.lock("x", &LockOptions::default().ttl(Duration::from_secs(20))).await.unwrap();
        let held = render("x", &client.inspect("x").await.unwrap());
        let lines: Vec<&str> = held.lines().collect();
        assert_eq!(lines[0], "name: x");
        assert_eq!(lines[1], format!("held by: {}", lease.holder()));
        assert!(lines[2].starts_with("remaining: ") && lines[2].ends_with('s'), "{held}");
        assert_eq!(lines[3], format!("last token: {}", lease.fence()));

        lease.release().await.unwrap();
        let free = render("x", &client.inspect("x").await.unwrap());
        assert_eq!(free, format!("name: x\nheld by: nobody\nlast token: {}\n", lease.fence()));
    }
}
