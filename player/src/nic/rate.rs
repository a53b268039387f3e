//! Counter rates. Pure: the caller reads the counters, then the clock, and passes both.
//!
//! Rules (docs/design.md, "Measuring"): a rate is Δcounter/Δt with t read immediately after the
//! counters; a counter that steps backward (driver reset, interface re-created) is
//! clamped to a zero step and re-based on the new value; the first reading has no rate.

use std::time::Instant;

/// Tracks one counter between readings.
#[derive(Debug, Clone, Default)]
pub struct CounterRate {
    prev: Option<(u64, Instant)>,
    /// Increase since the first reading, with backward steps counted as zero.
    pub since_baseline: u64,
    /// How many times the counter stepped backward (each one re-based it).
    pub resets: u64,
}

impl CounterRate {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed one reading taken at `at`; returns the rate per second since the previous
    /// reading, or None for the first one (or when no time passed).
    pub fn update(&mut self, value: u64, at: Instant) -> Option<f64> {
        let out = match self.prev {
            None => None,
            Some((prev_v, prev_t)) => {
                let delta = step(prev_v, value);
                if value < prev_v {
                    self.resets += 1;
                }
                self.since_baseline = self.since_baseline.saturating_add(delta);
                let dt = at.saturating_duration_since(prev_t).as_secs_f64();
                // The same clamp the fleet uses on its two readings (pfx-api).
                pfx_api::nic::rate_per_s(prev_v, value, dt)
            }
        };
        self.prev = Some((value, at));
        out
    }

    /// Forget the previous reading (the counter vanished); the next reading is a new base.
    pub fn clear(&mut self) {
        self.prev = None;
    }
}

/// The increase from `prev` to `cur`; a backward step counts as zero.
pub fn step(prev: u64, cur: u64) -> u64 {
    cur.saturating_sub(prev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn first_reading_has_no_rate() {
        let mut r = CounterRate::new();
        assert_eq!(r.update(2_400_000, Instant::now()), None);
    }

    #[test]
    fn rate_is_delta_over_elapsed() {
        let t0 = Instant::now();
        let mut r = CounterRate::new();
        r.update(1000, t0);
        let rate = r.update(1260, t0 + Duration::from_millis(2000));
        assert_eq!(rate, Some(130.0));
        assert_eq!(r.since_baseline, 260);
    }

    #[test]
    fn uses_the_reading_time_not_a_nominal_period() {
        // A 1 s ticker that fired late (1.3 s): the rate must use 1.3 s.
        let t0 = Instant::now();
        let mut r = CounterRate::new();
        r.update(0, t0);
        let rate = r.update(130, t0 + Duration::from_millis(1300)).unwrap();
        assert!((rate - 100.0).abs() < 1e-9, "{rate}");
    }

    #[test]
    fn counter_reset_is_clamped_to_zero_and_rebased() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut r = CounterRate::new();
        r.update(5000, t0);
        r.update(5100, t0 + s);
        // Driver reset: counter goes back to 7.
        assert_eq!(r.update(7, t0 + 2 * s), Some(0.0));
        assert_eq!(r.resets, 1);
        // Re-based on 7: the next step is 7 -> 57, not 5100 -> 57.
        assert_eq!(r.update(57, t0 + 3 * s), Some(50.0));
        assert_eq!(r.since_baseline, 150);
    }

    #[test]
    fn no_time_elapsed_gives_no_rate() {
        let t0 = Instant::now();
        let mut r = CounterRate::new();
        r.update(1, t0);
        assert_eq!(r.update(5, t0), None);
    }

    #[test]
    fn clear_makes_next_reading_a_baseline() {
        let t0 = Instant::now();
        let mut r = CounterRate::new();
        r.update(1, t0);
        r.clear();
        assert_eq!(r.update(100, t0 + Duration::from_secs(1)), None);
    }
}
