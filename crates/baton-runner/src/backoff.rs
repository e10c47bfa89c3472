//! Trying again while the store is out of reach (a server restarting, a connection dropped):
//! pauses that double from 100 ms to 2 s, for as long as a lease lasts, after which the run is
//! another driver's to take and trying on is pointless.

use std::time::{Duration, Instant};

pub(crate) struct Backoff {
    pause: Duration,
    give_up: Instant,
}

impl Backoff {
    /// Pauses for up to `term` from now.
    pub(crate) fn within(term: Duration) -> Self {
        Self {
            pause: Duration::from_millis(100),
            give_up: Instant::now() + term,
        }
    }

    /// The pause before the next try, or `None` once the term is over.
    pub(crate) fn next_pause(&mut self) -> Option<Duration> {
        if Instant::now() >= self.give_up {
            return None;
        }
        let pause = self.pause;
        self.pause = (self.pause * 2).min(Duration::from_secs(2));
        Some(pause)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_two_seconds_and_stop_when_the_term_is_over() {
        let mut backoff = Backoff::within(Duration::from_secs(60));
        let pauses: Vec<u64> = (0..7)
            .map(|_| backoff.next_pause().unwrap().as_millis() as u64)
            .collect();
        assert_eq!(pauses, [100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(Backoff::within(Duration::ZERO).next_pause(), None);
    }
}
