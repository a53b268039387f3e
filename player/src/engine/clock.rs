//! Absolute-deadline frame clock. Tick n's deadline is start + n × period: an overrun
//! never shifts later frames (as `sleep(period)` would), and a late loop skips to the
//! current tick instead of replaying a backlog.
//!
//! Pure arithmetic: the caller reads the clock (`sys::time::mono_ns`) and sleeps
//! (`sys::time::sleep_until`); times come in as arguments.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameClock {
    start_ns: u64,
    period_ns: u64,
}

/// What to run after a frame: the tick, and how many ticks were passed over to get there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    pub tick: u64,
    pub skipped: u64,
}

impl FrameClock {
    pub fn new(start_ns: u64, fps: u32) -> FrameClock {
        FrameClock {
            start_ns,
            period_ns: 1_000_000_000 / u64::from(fps.max(1)),
        }
    }

    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    pub fn start_ns(&self) -> u64 {
        self.start_ns
    }

    pub fn deadline(&self, tick: u64) -> u64 {
        self.start_ns + tick * self.period_ns
    }

    /// The frame of `tick` missed its deadline if its work ended after the next tick's
    /// deadline.
    pub fn missed(&self, tick: u64, end_ns: u64) -> bool {
        end_ns > self.deadline(tick + 1)
    }

    /// After frame `tick`, at `now_ns`: the next tick is tick + 1 if its deadline is still
    /// ahead or just passed; if the loop is later than that, the tick whose slot `now`
    /// falls in (the current frame), skipping the ones in between.
    pub fn next(&self, tick: u64, now_ns: u64) -> Next {
        let following = tick + 1;
        let current = now_ns.saturating_sub(self.start_ns) / self.period_ns;
        if current <= following {
            Next {
                tick: following,
                skipped: 0,
            }
        } else {
            Next {
                tick: current,
                skipped: current - following,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn deadlines_are_absolute() {
        let c = FrameClock::new(1000, 50); // 20 ms
        assert_eq!(c.deadline(0), 1000);
        assert_eq!(c.deadline(3), 1000 + 60 * MS);
    }

    #[test]
    fn on_time_frames_advance_by_one() {
        let c = FrameClock::new(0, 50);
        assert_eq!(
            c.next(0, 5 * MS),
            Next {
                tick: 1,
                skipped: 0
            }
        );
        // Slightly late into tick 1's slot: still tick 1, run at once, nothing skipped.
        assert_eq!(
            c.next(0, 25 * MS),
            Next {
                tick: 1,
                skipped: 0
            }
        );
        assert!(!c.missed(0, 20 * MS));
        assert!(c.missed(0, 20 * MS + 1));
    }

    #[test]
    fn a_long_stall_skips_to_the_current_frame_not_a_backlog() {
        let c = FrameClock::new(0, 50);
        // Frame 0 took 105 ms: we are in tick 5's slot. Run tick 5, skip 1..=4.
        assert_eq!(
            c.next(0, 105 * MS),
            Next {
                tick: 5,
                skipped: 4
            }
        );
    }

    #[test]
    fn sixty_fps_period_and_drift_free_deadlines() {
        let c = FrameClock::new(0, 60);
        assert_eq!(c.period_ns(), 16_666_666);
        // After an hour the deadline is off by the integer division only (< 1 ms).
        let hour = c.deadline(60 * 3600);
        assert!(3_600_000_000_000 - hour < MS, "{hour}");
    }
}
