//! Which playlist item plays at a given moment, and where in it. Pure: the loop passes
//! the time. Sequence time follows the wall clock: an item that lasts 60 s ends 60 s after
//! it began, whatever the output frame rate, and the next item starts exactly there.

use crate::config::show::{PatternItem, PatternKind};

/// A playlist item as its timing sees it: a sequence's length, or the pattern itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Fseq { frames: u32, step_ms: u32 },
    Pattern(PatternItem),
}

impl Entry {
    fn duration_ns(&self) -> u64 {
        match self {
            Entry::Fseq { frames, step_ms } => u64::from(*frames) * u64::from(*step_ms) * 1_000_000,
            Entry::Pattern(p) => (p.seconds * 1e9) as u64,
        }
        .max(1_000_000)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Now {
    /// Frame `frame` of the fseq at playlist position `item`.
    Fseq { item: usize, frame: u32 },
    Pattern {
        item: usize,
        kind: PatternKind,
        color: [u8; 3],
        t: f64,
    },
    /// A playlist without `loop` has ended.
    Finished,
}

#[derive(Debug, Clone)]
pub struct Playlist {
    entries: Vec<Entry>,
    looped: bool,
    current: usize,
    item_start_ns: u64,
}

impl Playlist {
    pub fn new(entries: Vec<Entry>, looped: bool, start_ns: u64) -> Playlist {
        Playlist {
            entries,
            looped,
            current: 0,
            item_start_ns: start_ns,
        }
    }

    pub fn current_item(&self) -> usize {
        self.current
    }

    /// When the item `at` last returned began, on the loop's clock.
    pub fn item_start_ns(&self) -> u64 {
        self.item_start_ns
    }

    /// When the item `at` last returned ends (a graceful stop waits for it); None when the
    /// playlist has no item left (finished or empty).
    pub fn item_end_ns(&self) -> Option<u64> {
        let e = self.entries.get(self.current)?;
        Some(self.item_start_ns + e.duration_ns())
    }

    pub fn at(&mut self, now_ns: u64) -> Now {
        if self.entries.is_empty() {
            return Now::Finished;
        }
        loop {
            if self.current >= self.entries.len() {
                return Now::Finished;
            }
            let d = self.entries[self.current].duration_ns();
            let pos = now_ns.saturating_sub(self.item_start_ns);
            if pos < d {
                return match &self.entries[self.current] {
                    Entry::Fseq { frames, step_ms } => {
                        let frame = (pos / (u64::from(*step_ms).max(1) * 1_000_000)) as u32;
                        Now::Fseq {
                            item: self.current,
                            frame: frame.min(frames.saturating_sub(1)),
                        }
                    }
                    Entry::Pattern(p) => Now::Pattern {
                        item: self.current,
                        kind: p.kind,
                        color: p.color,
                        t: pos as f64 / 1e9,
                    },
                };
            }
            // The next item starts where this one ended, not when we noticed.
            self.item_start_ns += d;
            self.current += 1;
            if self.current == self.entries.len() && self.looped {
                self.current = 0;
                // After a very long stall, don't walk through every missed lap.
                let lap: u64 = self.entries.iter().map(Entry::duration_ns).sum();
                let behind = now_ns.saturating_sub(self.item_start_ns);
                self.item_start_ns += behind / lap * lap;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn list() -> Vec<Entry> {
        vec![
            Entry::Fseq {
                frames: 600,
                step_ms: 50,
            }, // 30 s
            Entry::Pattern(PatternItem {
                kind: PatternKind::Solid,
                color: [1, 2, 3],
                seconds: 10.0,
            }),
        ]
    }

    #[test]
    fn fseq_frame_follows_wall_clock_not_output_rate() {
        let mut p = Playlist::new(list(), true, 0);
        assert_eq!(p.at(0), Now::Fseq { item: 0, frame: 0 });
        assert_eq!(p.at(S), Now::Fseq { item: 0, frame: 20 });
        assert_eq!(
            p.at(30 * S - 1),
            Now::Fseq {
                item: 0,
                frame: 599
            }
        );
    }

    #[test]
    fn items_chain_exactly_and_loop() {
        let mut p = Playlist::new(list(), true, 0);
        assert_eq!(
            p.at(31 * S),
            Now::Pattern {
                item: 1,
                kind: PatternKind::Solid,
                color: [1, 2, 3],
                t: 1.0
            }
        );
        assert_eq!(
            p.at(40 * S + 25 * 1_000_000),
            Now::Fseq { item: 0, frame: 0 }
        );
        // Ten laps later, still in step.
        assert_eq!(p.at(400 * S + 2 * S), Now::Fseq { item: 0, frame: 40 });
    }

    #[test]
    fn without_loop_it_finishes() {
        let mut p = Playlist::new(list(), false, 0);
        assert_eq!(p.at(41 * S), Now::Finished);
        assert_eq!(p.item_end_ns(), None);
    }

    #[test]
    fn the_current_item_ends_where_the_next_begins() {
        let mut p = Playlist::new(list(), true, 0);
        p.at(5 * S);
        assert_eq!(p.item_end_ns(), Some(30 * S));
        p.at(35 * S);
        assert_eq!(p.item_end_ns(), Some(40 * S));
        p.at(41 * S); // the second lap
        assert_eq!(p.item_end_ns(), Some(70 * S));
        assert_eq!(Playlist::new(Vec::new(), true, 0).item_end_ns(), None);
    }
}
