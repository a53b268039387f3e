//! How a remote moves its frame deadlines onto the master's timeline. Pure.
//!
//! The remote plays position p of the file at `base + p` on its own clock. The estimator
//! says where the master's position 0 is (`target`). Each frame the pacer moves `base`
//! toward it by a fraction of the error, at most `MAX_SLEW_NS`: gentle enough that the
//! estimator's own noise does not shake the frames, fast enough to follow a drifting
//! clock. Only when it is far off (more than two frames, or a new start) does it jump.

/// The share of the error corrected per frame.
const GAIN: f64 = 0.2;
/// At most this much per frame (2 % of a 25 ms frame): no visible tempo change.
pub const MAX_SLEW_NS: i64 = 500_000;
/// An error below this is left alone, so an estimate that wobbles by a few µs does not
/// count as a correction every frame.
const DEADBAND_NS: i64 = 20_000;
/// While the estimate is young (a few packets since a start), its first samples may have
/// waited in a socket buffer: it only ever moves earlier as better ones come, and the
/// pacer jumps with it beyond this instead of slewing for seconds.
const SETTLING_JUMP_NS: i64 = 1_000_000;
/// An estimate of fewer samples than this is settling.
pub const SETTLED_SAMPLES: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The first frame of a start, or far off: `base` is the target now.
    Jump,
    /// `base` moved by this much (ns).
    Slew(i64),
    /// Within the deadband.
    Hold,
}

#[derive(Debug, Clone, Default)]
pub struct Pacer {
    base: Option<i64>,
    pub jumps: u64,
    pub corrections: u64,
    /// base − target after the last step (ns): how far this unit plays from the master.
    pub error_ns: i64,
}

impl Pacer {
    /// A new start: the next step jumps.
    pub fn reset(&mut self) {
        self.base = None;
    }

    pub fn base(&self) -> Option<i64> {
        self.base
    }

    /// One frame: moves `base` toward `target` and returns what it did. `frame_ns` is the
    /// sequence's frame period (the jump threshold is two of them); `settling` says the
    /// estimate is young (see `SETTLING_JUMP_NS`).
    pub fn step(&mut self, target: i64, frame_ns: i64, settling: bool) -> Step {
        let Some(base) = self.base else {
            self.base = Some(target);
            self.jumps += 1;
            self.error_ns = 0;
            return Step::Jump;
        };
        let err = base - target;
        let far = if settling {
            SETTLING_JUMP_NS
        } else {
            2 * frame_ns
        };
        if err.abs() > far {
            self.base = Some(target);
            self.jumps += 1;
            self.error_ns = 0;
            return Step::Jump;
        }
        if err.abs() <= DEADBAND_NS {
            self.error_ns = err;
            return Step::Hold;
        }
        let mv = ((err as f64 * GAIN) as i64).clamp(-MAX_SLEW_NS, MAX_SLEW_NS);
        let mv = if mv == 0 { err.signum() } else { mv };
        self.base = Some(base - mv);
        self.corrections += 1;
        self.error_ns = err - mv;
        Step::Slew(-mv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimator::{Estimator, tests::Rng};

    const MS: i64 = 1_000_000;
    const FRAME: i64 = 25 * MS;

    #[test]
    fn first_step_and_far_errors_jump_small_ones_slew_within_bounds() {
        let mut p = Pacer::default();
        assert_eq!(p.step(1000 * MS, FRAME, false), Step::Jump);
        assert_eq!(p.base(), Some(1000 * MS));
        // 10 ms off: slews by 20 % capped at 0.5 ms.
        assert_eq!(p.step(1010 * MS, FRAME, false), Step::Slew(MAX_SLEW_NS));
        // 51 ms off (> 2 frames): jumps.
        assert_eq!(p.step(1051 * MS, FRAME, false), Step::Jump);
        assert_eq!(p.jumps, 2);
        assert_eq!(p.step(1051 * MS + 5_000, FRAME, false), Step::Hold);
        // A young estimate: 2 ms is far enough to jump.
        assert_eq!(p.step(1049 * MS, FRAME, true), Step::Jump);
        assert_eq!(
            p.step(1049 * MS + 900_000, FRAME, true),
            Step::Slew(180_000)
        );
        p.reset();
        assert_eq!(p.step(0, FRAME, false), Step::Jump);
    }

    #[test]
    fn a_slew_never_exceeds_its_bound_and_converges() {
        let mut p = Pacer::default();
        p.step(0, FRAME, false);
        let target = 40 * MS; // within two frames
        let mut prev = p.base().unwrap();
        for _ in 0..400 {
            p.step(target, FRAME, false);
            let b = p.base().unwrap();
            assert!((b - prev).abs() <= MAX_SLEW_NS);
            prev = b;
        }
        assert!((prev - target).abs() <= DEADBAND_NS);
        assert_eq!(p.jumps, 1, "followed, never jumped");
    }

    /// The whole remote path on a synthetic lossy, jittery network with a drifting
    /// clock: the frames' local deadlines stay within a fraction of a millisecond of
    /// the master's true frame times, where following each packet's own arrival would be
    /// off by the jitter (mean, median and max all different).
    #[test]
    fn jittery_lossy_drifting_network_stays_well_under_a_millisecond() {
        let mut rng = Rng(42);
        let ppm = -30e-6;
        let floor = 7_000 * MS; // local time of master position 0, plus the delay floor
        let truth = |pos: i64| floor + pos + (pos as f64 * ppm) as i64;
        let mut est = Estimator::default();
        let mut pace = Pacer::default();
        let mut errs = Vec::new();
        let mut naive = Vec::new();
        let mut last_arrival_based = None;
        for f in 0..(40 * 120) {
            let pos = f * FRAME;
            // Master sends every 4 frames for the first 32, then every 10; 10 % lost.
            let sends = if f <= 32 { f % 4 == 0 } else { f % 10 == 0 };
            if sends && rng.next_f64() >= 0.10 {
                let arrival = truth(pos) + rng.jitter_ns();
                est.push(arrival as u64, pos);
                last_arrival_based = Some(arrival - pos);
            }
            let Some(e) = est.estimate() else { continue };
            pace.step(e.base_at(pos), FRAME, e.samples < SETTLED_SAMPLES);
            if f > 40 * 10 {
                errs.push((pace.base().unwrap() + pos - truth(pos)).abs());
                naive.push((last_arrival_based.unwrap() + pos - truth(pos)).abs());
            }
        }
        let pct = |v: &mut Vec<i64>, q: f64| {
            v.sort();
            v[((v.len() - 1) as f64 * q) as usize]
        };
        let p99 = pct(&mut errs, 0.99);
        let max = *errs.last().unwrap();
        let naive_p99 = pct(&mut naive, 0.99);
        assert!(p99 < 300_000, "p99 {p99} ns");
        assert!(max < 600_000, "max {max} ns");
        assert!(
            naive_p99 > 2_000_000,
            "per-packet following would be off by {naive_p99}"
        );
        assert!(pace.jumps <= 10, "jumps {}", pace.jumps);
    }
}
