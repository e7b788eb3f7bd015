//! Retry pacing: pauses that double from a first to a longest one, and end at a deadline. Every retry loop in core
//! paces itself with it, so none can go on for ever.

use std::time::Duration;

use tokio::time::Instant;

/// The pauses of one retry loop.
#[derive(Debug)]
pub(crate) struct Backoff {
    pause: Duration,
    longest: Duration,
    until: Instant,
}

impl Backoff {
    /// Pauses from `first`, doubling up to `longest`, none ending at or past `until`.
    pub(crate) fn new(first: Duration, longest: Duration, until: Instant) -> Self {
        Backoff { pause: first, longest, until }
    }

    /// Sleeps the next pause and says `true`; says `false` at once if that pause would reach the deadline.
    pub(crate) async fn wait(&mut self) -> bool {
        if Instant::now() + self.pause >= self.until {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(self.longest);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pauses_double_up_to_the_longest_and_stop_at_the_deadline() {
        let start = Instant::now();
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new(ms(10), ms(40), start + ms(150));
        let mut ends = Vec::new();
        while backoff.wait().await {
            ends.push(start.elapsed().as_millis());
        }
        // 10, 20, 40, 40: the next 40 would end at 150.
        assert_eq!(ends, [10, 30, 70, 110]);
        assert_eq!(start.elapsed(), ms(110), "the refusal does not sleep");
    }
}
