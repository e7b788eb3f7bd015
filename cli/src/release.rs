//! `fencelock release --force NAME`: delete a lock record whoever holds it, for operators clearing a stuck lock.

use fencelock::Client;

use crate::args::ReleaseArgs;
use crate::exit::Failure;
use crate::status::print_stdout;

/// Exits 0 whether or not the lock was held, so clearing a lock is idempotent; the output says which.
pub async fn release(args: ReleaseArgs) -> Result<i32, Failure> {
    debug_assert!(args.force, "clap requires --force");
    let client = Client::connect(&args.backend.url()).await?;
    let released = client.force_release(&args.name).await;
    client.close().await;
    let name = &args.name;
    match released? {
        true => print_stdout(&format!("released {name}; its holder loses the lease at its next renewal\n"))?,
        false => print_stdout(&format!("{name} was not held; nothing to release\n"))?,
    }
    Ok(0)
}
