use std::time::Duration;

/// Longest delay between two attempts, however many retries are configured.
const MAX_DELAY: Duration = Duration::from_secs(600);

/// Delay before attempt `next_attempt` (2 for the first retry): `base * 2^(n-2)`, capped, then
/// scaled by a jitter factor in [0.5, 1.5) drawn from `unit` (a number in [0, 1)). Jitter keeps
/// tasks that failed together from retrying in lockstep against the same resource.
pub fn backoff_delay(base: Duration, next_attempt: u32, unit: f64) -> Duration {
    let doublings = next_attempt.saturating_sub(2).min(20);
    let exp = base.saturating_mul(1u32 << doublings).min(MAX_DELAY);
    exp.mul_f64(0.5 + unit.clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_and_caps() {
        let base = Duration::from_secs(2);
        assert_eq!(backoff_delay(base, 2, 0.5), Duration::from_secs(2));
        assert_eq!(backoff_delay(base, 3, 0.5), Duration::from_secs(4));
        assert_eq!(backoff_delay(base, 4, 0.5), Duration::from_secs(8));
        assert_eq!(backoff_delay(base, 40, 0.5), MAX_DELAY);
        assert_eq!(backoff_delay(base, 2, 0.0), Duration::from_secs(1));
        assert!(backoff_delay(base, 2, 0.999) < Duration::from_secs(3));
    }
}
