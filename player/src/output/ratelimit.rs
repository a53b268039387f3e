use std::time::{Duration, Instant};

/// Lets one event through per interval and counts the rest, so an error that fires every
/// frame writes one journal line every few seconds, not 60 a second.
#[derive(Debug, Clone)]
pub struct RateLimit {
    interval: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimit {
    pub fn new(interval: Duration) -> RateLimit {
        RateLimit {
            interval,
            last: None,
            suppressed: 0,
        }
    }

    /// `Some(n)` when the caller should log now; n events were suppressed since the last.
    pub fn check(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(t) if now.duration_since(t) < self.interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_per_interval_and_counts_the_rest() {
        let mut r = RateLimit::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(r.check(t0), Some(0));
        for i in 1..60 {
            assert_eq!(r.check(t0 + Duration::from_millis(i * 16)), None);
        }
        assert_eq!(r.check(t0 + Duration::from_secs(5)), Some(59));
    }
}
