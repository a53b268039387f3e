//! The master's timeline on this unit's clock, from sync packets: each gives the master's
//! position in the file (seconds elapsed) and this unit's monotonic arrival time. Pure:
//! times come in as arguments.
//!
//! An arrival is the send time plus a network delay that is never below some floor and
//! often above it (queueing, Wi-Fi retries, `netem` jitter). So the timeline is the lower
//! envelope of (arrival − position), not its mean: the mean moves with every burst of
//! jitter, the floor does not. The envelope's slope (the two clocks' rate difference) is
//! fitted through the minima of four slices of the window, and the line is then lowered
//! onto the lowest sample, so no sample lies below it.

/// Samples kept: at FPP's cadence (every 10 frames) about 6–12 s.
pub const WINDOW: usize = 32;
/// Two crystals differ by tens of ppm; a fitted slope beyond this is noise.
const MAX_RATE_PPM: f64 = 500.0;
/// Below this span of master time the slope is not fitted (too short to tell).
const MIN_SPAN_NS: f64 = 2e9;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    /// Local time of master position 0, at position `at_pos_ns` (the line's value there).
    pub base_ns: i64,
    /// Local nanoseconds per master nanosecond, minus one.
    pub rate: f64,
    /// Where on the master's timeline `base_ns` was taken.
    pub at_pos_ns: i64,
    /// Mean delay above the envelope over the window: how much the packets wander.
    pub jitter_ns: u64,
    pub samples: usize,
}

impl Estimate {
    /// Local time at which the master is (or was) at `pos_ns`.
    pub fn local_at(&self, pos_ns: i64) -> i64 {
        self.base_ns + pos_ns + ((pos_ns - self.at_pos_ns) as f64 * self.rate) as i64
    }

    /// The local time of position 0 as seen at `pos_ns` (the base, following the slope).
    pub fn base_at(&self, pos_ns: i64) -> i64 {
        self.local_at(pos_ns) - pos_ns
    }
}

#[derive(Debug, Clone)]
pub struct Estimator {
    /// (master position, arrival − position), oldest first from `head`.
    ring: [(i64, i64); WINDOW],
    head: usize,
    len: usize,
}

impl Default for Estimator {
    fn default() -> Self {
        Estimator {
            ring: [(0, 0); WINDOW],
            head: 0,
            len: 0,
        }
    }
}

impl Estimator {
    /// Forgets everything: a new start, a skip, a master that restarted.
    pub fn reset(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, arrival_ns: u64, pos_ns: i64) {
        let d = arrival_ns as i64 - pos_ns;
        let i = (self.head + self.len) % WINDOW;
        self.ring[i] = (pos_ns, d);
        if self.len < WINDOW {
            self.len += 1;
        } else {
            self.head = (self.head + 1) % WINDOW;
        }
    }

    fn get(&self, k: usize) -> (i64, i64) {
        self.ring[(self.head + k) % WINDOW]
    }

    pub fn estimate(&self) -> Option<Estimate> {
        if self.len == 0 {
            return None;
        }
        let (last_pos, _) = self.get(self.len - 1);
        let (first_pos, _) = self.get(0);
        let span = (last_pos - first_pos) as f64;
        // The slope through the minima of four slices of the window.
        let mut rate = 0.0;
        if self.len >= 8 && span >= MIN_SPAN_NS {
            let slice = self.len / 4;
            let mut pts = [(0f64, 0f64); 4];
            for (s, pt) in pts.iter_mut().enumerate() {
                let end = if s == 3 { self.len } else { (s + 1) * slice };
                let mut best = self.get(s * slice);
                for k in s * slice..end {
                    let p = self.get(k);
                    if p.1 < best.1 {
                        best = p;
                    }
                }
                *pt = ((best.0 - last_pos) as f64, (best.1 - self.get(0).1) as f64);
            }
            let mx = pts.iter().map(|p| p.0).sum::<f64>() / 4.0;
            let my = pts.iter().map(|p| p.1).sum::<f64>() / 4.0;
            let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
            let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
            if sxx > 0.0 {
                rate = (sxy / sxx).clamp(-MAX_RATE_PPM * 1e-6, MAX_RATE_PPM * 1e-6);
            }
        }
        // Lower the line (through the newest position) onto the lowest sample.
        let line = |pos: i64| ((pos - last_pos) as f64 * rate) as i64;
        let mut base = i64::MAX;
        for k in 0..self.len {
            let (p, d) = self.get(k);
            base = base.min(d - line(p));
        }
        let mut above = 0u64;
        for k in 0..self.len {
            let (p, d) = self.get(k);
            above += (d - line(p) - base).max(0) as u64;
        }
        Some(Estimate {
            base_ns: base,
            rate,
            at_pos_ns: last_pos,
            jitter_ns: above / self.len as u64,
            samples: self.len,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small deterministic generator for the synthetic networks (xorshift64*).
    pub(crate) struct Rng(pub u64);
    impl Rng {
        pub fn next_f64(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
        }
        /// Delay above the floor: mostly small, now and then a long queueing delay, so
        /// that mean, median and max differ a lot.
        pub fn jitter_ns(&mut self) -> i64 {
            let u = self.next_f64();
            let base = -(1.0 - u).ln() * 300_000.0; // exponential, mean 0.3 ms
            let spike = if self.next_f64() < 0.05 {
                8_000_000.0 * self.next_f64()
            } else {
                0.0
            };
            (base + spike) as i64
        }
    }

    const MS: i64 = 1_000_000;

    #[test]
    fn a_clean_line_is_found_exactly() {
        let mut e = Estimator::default();
        for k in 0..20i64 {
            e.push((5_000 * MS + k * 250 * MS) as u64, k * 250 * MS);
        }
        let est = e.estimate().unwrap();
        assert_eq!(est.base_at(0), 5_000 * MS);
        assert_eq!(est.jitter_ns, 0);
    }

    #[test]
    fn the_envelope_ignores_jitter_that_moves_the_mean_and_median() {
        let mut rng = Rng(7);
        let mut e = Estimator::default();
        let floor = 900 * MS; // local time of position 0 plus the delay floor
        let mut delays = Vec::new();
        for k in 0..WINDOW as i64 {
            let pos = k * 250 * MS;
            let j = rng.jitter_ns();
            delays.push(j);
            e.push((floor + pos + j) as u64, pos);
        }
        delays.sort();
        let mean = delays.iter().sum::<i64>() / delays.len() as i64;
        let median = delays[delays.len() / 2];
        let max = *delays.last().unwrap();
        assert!(mean > median && max > 5 * mean, "{mean} {median} {max}");
        let est = e.estimate().unwrap();
        let err = est.base_at(31 * 250 * MS) - floor;
        assert!(
            err.abs() <= delays[0] + 50_000,
            "error {err} ns; mean jitter {mean}"
        );
        assert!(
            err.abs() < median / 2,
            "the envelope beats the median: {err} vs {median}"
        );
        assert!(est.jitter_ns > 0);
    }

    #[test]
    fn clock_rate_difference_is_followed() {
        // The remote's clock runs 50 ppm fast: a frame's local time drifts 50 µs per s.
        let mut rng = Rng(11);
        let mut e = Estimator::default();
        let ppm = 50e-6;
        let mut last = None;
        for k in 0..200i64 {
            let pos = k * 250 * MS;
            let local = 2_000 * MS + pos + (pos as f64 * ppm) as i64;
            e.push((local + rng.jitter_ns()) as u64, pos);
            last = Some((pos, local));
        }
        let (pos, local) = last.unwrap();
        let est = e.estimate().unwrap();
        assert!((est.rate - ppm).abs() < 20e-6, "rate {}", est.rate);
        let err = est.local_at(pos) - local;
        assert!(err.abs() < 200_000, "error {err} ns");
        // And a little ahead, where the next frames fall.
        let ahead = pos + 1_000 * MS;
        let want = 2_000 * MS + ahead + (ahead as f64 * ppm) as i64;
        assert!((est.local_at(ahead) - want).abs() < 250_000);
    }

    #[test]
    fn reset_forgets() {
        let mut e = Estimator::default();
        e.push(10, 0);
        e.reset();
        assert!(e.estimate().is_none());
    }
}
