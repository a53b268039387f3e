/// Lets one event through per interval and counts the rest, so an error that fires every
/// frame writes one journal line every few seconds, not 60 a second. The one rate limit
/// of the player's logs (outputs and the render loop's source warnings alike): time comes
/// in as the loop's monotonic nanoseconds (`sys::time::mono_ns`), so it reads no clock
/// itself and allocates nothing.
#[derive(Debug, Clone)]
pub struct RateLimit {
    interval_ns: u64,
    /// When the next line may go; None before the first.
    next_ns: Option<u64>,
    suppressed: u64,
}

impl RateLimit {
    pub fn new(interval: std::time::Duration) -> RateLimit {
        RateLimit {
            interval_ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
            next_ns: None,
            suppressed: 0,
        }
    }

    /// `Some(n)` when the caller should log now; n events were suppressed since the last.
    pub fn check(&mut self, now_ns: u64) -> Option<u64> {
        match self.next_ns {
            Some(next) if now_ns < next => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.next_ns = Some(now_ns.saturating_add(self.interval_ns));
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn one_per_interval_and_counts_the_rest() {
        let mut r = RateLimit::new(Duration::from_secs(5));
        let t0 = 1_000u64;
        assert_eq!(r.check(t0), Some(0));
        for i in 1..60 {
            assert_eq!(r.check(t0 + i * 16_000_000), None);
        }
        assert_eq!(r.check(t0 + 5_000_000_000), Some(59));
        assert_eq!(r.check(t0 + 5_000_000_001), None);
    }

    #[test]
    fn the_first_event_logs_even_at_time_zero() {
        let mut r = RateLimit::new(Duration::from_secs(5));
        assert_eq!(r.check(0), Some(0));
        assert_eq!(r.check(1), None);
    }
}
