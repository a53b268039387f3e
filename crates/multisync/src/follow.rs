//! The remote's state machine: what the master's packets and their silence mean. Pure:
//! packets and times in, actions out; the shell opens files and swaps engines.
//!
//! idle → (open) → open → (start, or a sync for a file) → playing → (stop) → idle.
//! Playing with no packet for `after` → `then`: stop (black until the next start) or
//! continue (the item plays out on the last estimate) → lost, until the master returns.

use super::estimator::Estimator;
use super::packet::{Action, FileType, Sync};

/// A sync whose position disagrees with the estimate by more than this is a skip or a
/// restart on the master: start over on the new timeline.
const SKIP_NS: i64 = 500_000_000;
/// Positions beyond a week (or not numbers) are not a sequence's: such a packet is
/// ignored, so no arithmetic downstream meets an absurd time.
const MAX_POS_S: f32 = 7.0 * 86_400.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    Stop,
    Continue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost {
    pub after_ns: u64,
    pub then: Then,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Idle,
    /// The master opened this file; it is being prepared.
    Open(String),
    Playing(String),
    /// The master went quiet; the item plays out on the last estimate.
    Lost(String),
}

impl State {
    pub fn name(&self) -> &'static str {
        match self {
            State::Idle => "idle",
            State::Open(_) => "open",
            State::Playing(_) => "playing",
            State::Lost(_) => "lost",
        }
    }
    pub fn sequence(&self) -> Option<&str> {
        match self {
            State::Idle => None,
            State::Open(s) | State::Playing(s) | State::Lost(s) => Some(s),
        }
    }
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Do {
    /// Open this file ahead of its start.
    Prepare(String),
    /// Play this file from the master's position (the estimate says where).
    Play(String),
    /// Black, until the next start.
    Stop,
}

#[derive(Debug, Clone)]
pub struct Follow {
    pub state: State,
    pub estimator: Estimator,
    /// Bumped at every new timeline (start, skip, restart): the render thread jumps.
    pub generation: u64,
    lost: Lost,
    /// The remote offset: the master's position is taken this much earlier.
    offset_ns: i64,
    last_packet_ns: Option<u64>,
}

impl Follow {
    pub fn new(lost: Lost, offset_ms: i64) -> Follow {
        Follow {
            state: State::Idle,
            estimator: Estimator::default(),
            generation: 0,
            lost,
            offset_ns: offset_ms * 1_000_000,
            last_packet_ns: None,
        }
    }

    pub fn last_packet_ns(&self) -> Option<u64> {
        self.last_packet_ns
    }

    fn new_timeline(&mut self) {
        self.estimator.reset();
        self.generation += 1;
    }

    /// A sync packet that arrived at `now_ns` (this unit's monotonic clock).
    pub fn packet(&mut self, now_ns: u64, s: &Sync<'_>) -> Option<Do> {
        if s.file_type != FileType::Sequence {
            // Media sync: pfx plays no audio.
            return None;
        }
        self.last_packet_ns = Some(now_ns);
        let playing = match &self.state {
            State::Playing(n) | State::Lost(n) => Some(n.as_str()),
            _ => None,
        };
        match s.action {
            Action::Open => match playing {
                Some(_) => Some(Do::Prepare(s.name.to_string())),
                None => {
                    self.state = State::Open(s.name.to_string());
                    Some(Do::Prepare(s.name.to_string()))
                }
            },
            Action::Start => {
                self.new_timeline();
                self.state = State::Playing(s.name.to_string());
                Some(Do::Play(s.name.to_string()))
            }
            Action::Stop => {
                if playing.is_some_and(|n| n == s.name)
                    || matches!(&self.state, State::Open(n) if n == s.name)
                {
                    self.state = State::Idle;
                    self.estimator.reset();
                    Some(Do::Stop)
                } else {
                    None
                }
            }
            Action::Sync => {
                if !(s.seconds.is_finite() && (0.0..=MAX_POS_S).contains(&s.seconds)) {
                    return None;
                }
                let pos = (f64::from(s.seconds) * 1e9) as i64 - self.offset_ns;
                let pos = pos.max(0);
                let mut act = None;
                if playing != Some(s.name) {
                    // A sync for a file we do not play (we joined late, or missed the
                    // start): play it from where the master is.
                    self.new_timeline();
                    self.state = State::Playing(s.name.to_string());
                    act = Some(Do::Play(s.name.to_string()));
                } else if matches!(self.state, State::Lost(_)) {
                    self.state = State::Playing(s.name.to_string());
                } else if let Some(e) = self.estimator.estimate() {
                    let predicted = now_ns as i64 - e.base_at(pos);
                    if (predicted - pos).abs() > SKIP_NS {
                        self.new_timeline();
                    }
                }
                self.estimator.push(now_ns, pos);
                act
            }
        }
    }

    /// Time passes without packets.
    pub fn tick(&mut self, now_ns: u64) -> Option<Do> {
        if !matches!(self.state, State::Playing(_)) {
            return None;
        }
        let quiet = now_ns.saturating_sub(self.last_packet_ns.unwrap_or(now_ns));
        if quiet < self.lost.after_ns {
            return None;
        }
        match self.lost.then {
            Then::Stop => {
                self.state = State::Idle;
                self.estimator.reset();
                Some(Do::Stop)
            }
            Then::Continue => {
                if let State::Playing(n) = &self.state {
                    self.state = State::Lost(n.clone());
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn pkt(action: Action, name: &str, seconds: f32) -> Sync<'_> {
        Sync {
            action,
            file_type: FileType::Sequence,
            frame: (seconds * 40.0) as u32,
            seconds,
            name,
        }
    }

    fn follow(then: Then) -> Follow {
        Follow::new(
            Lost {
                after_ns: 5_000 * MS,
                then,
            },
            0,
        )
    }

    #[test]
    fn open_start_sync_stop() {
        let mut f = follow(Then::Stop);
        assert_eq!(
            f.packet(0, &pkt(Action::Open, "a.fseq", 0.0)),
            Some(Do::Prepare("a.fseq".into()))
        );
        assert_eq!(f.state, State::Open("a.fseq".into()));
        assert_eq!(
            f.packet(MS, &pkt(Action::Start, "a.fseq", 0.0)),
            Some(Do::Play("a.fseq".into()))
        );
        let g = f.generation;
        for k in 0..10u64 {
            assert_eq!(
                f.packet(
                    MS + k * 250 * MS,
                    &pkt(Action::Sync, "a.fseq", k as f32 * 0.25)
                ),
                None
            );
        }
        assert_eq!(f.generation, g, "a steady master is one timeline");
        assert!(f.estimator.estimate().is_some());
        // A stop for another file is not ours.
        assert_eq!(f.packet(3000 * MS, &pkt(Action::Stop, "b.fseq", 0.0)), None);
        assert_eq!(
            f.packet(3000 * MS, &pkt(Action::Stop, "a.fseq", 0.0)),
            Some(Do::Stop)
        );
        assert_eq!(f.state, State::Idle);
    }

    #[test]
    fn a_sync_without_a_start_plays_that_file_where_the_master_is() {
        let mut f = follow(Then::Stop);
        assert_eq!(
            f.packet(10 * MS, &pkt(Action::Sync, "late.fseq", 12.5)),
            Some(Do::Play("late.fseq".into()))
        );
        let e = f.estimator.estimate().unwrap();
        assert_eq!(
            e.base_at(12_500 * MS as i64),
            10 * MS as i64 - 12_500 * MS as i64
        );
        // The master moves on to another file without us hearing stop/start.
        assert_eq!(
            f.packet(20 * MS, &pkt(Action::Sync, "next.fseq", 0.1)),
            Some(Do::Play("next.fseq".into()))
        );
    }

    #[test]
    fn a_skip_or_restart_starts_a_new_timeline() {
        let mut f = follow(Then::Stop);
        f.packet(0, &pkt(Action::Start, "a", 0.0));
        for k in 0..5u64 {
            f.packet(k * 250 * MS, &pkt(Action::Sync, "a", k as f32 * 0.25));
        }
        let g = f.generation;
        // The master jumped 30 s ahead.
        f.packet(1250 * MS, &pkt(Action::Sync, "a", 31.25));
        assert_eq!(f.generation, g + 1);
        assert_eq!(f.estimator.len(), 1);
        // A restart (start again) is a new timeline too.
        assert_eq!(
            f.packet(1300 * MS, &pkt(Action::Start, "a", 0.0)),
            Some(Do::Play("a".into()))
        );
        assert_eq!(f.generation, g + 2);
    }

    #[test]
    fn a_lost_master_stops_after_the_configured_time() {
        let mut f = follow(Then::Stop);
        f.packet(0, &pkt(Action::Start, "a", 0.0));
        f.packet(100 * MS, &pkt(Action::Sync, "a", 0.1));
        assert_eq!(f.tick(5_000 * MS), None, "still within after_s");
        assert_eq!(f.tick(5_100 * MS), Some(Do::Stop));
        assert_eq!(f.state, State::Idle);
        assert_eq!(f.tick(9_000 * MS), None, "idle is not lost");
    }

    #[test]
    fn a_lost_master_with_continue_plays_out_and_is_picked_up_again() {
        let mut f = follow(Then::Continue);
        f.packet(0, &pkt(Action::Start, "a", 0.0));
        f.packet(100 * MS, &pkt(Action::Sync, "a", 0.1));
        assert_eq!(f.tick(6_000 * MS), None);
        assert_eq!(f.state, State::Lost("a".into()));
        assert!(f.estimator.estimate().is_some(), "keeps the last estimate");
        assert_eq!(f.packet(7_000 * MS, &pkt(Action::Sync, "a", 7.0)), None);
        assert_eq!(f.state, State::Playing("a".into()));
    }

    #[test]
    fn absurd_positions_are_ignored() {
        let mut f = follow(Then::Stop);
        f.packet(0, &pkt(Action::Start, "a", 0.0));
        for bad in [f32::NAN, f32::INFINITY, -1.0, 1e30] {
            assert_eq!(f.packet(MS, &pkt(Action::Sync, "a", bad)), None);
        }
        assert!(
            f.estimator.estimate().is_none(),
            "none of them became a sample"
        );
        assert_eq!(f.packet(MS, &pkt(Action::Sync, "a", 0.5)), None);
        assert!(f.estimator.estimate().is_some());
    }

    #[test]
    fn the_remote_offset_moves_the_timeline_and_media_is_ignored() {
        let mut f = Follow::new(
            Lost {
                after_ns: 5_000 * MS,
                then: Then::Stop,
            },
            100,
        );
        f.packet(0, &pkt(Action::Start, "a", 0.0));
        f.packet(1_000 * MS, &pkt(Action::Sync, "a", 1.0));
        let e = f.estimator.estimate().unwrap();
        // Position 0.9 s at 1.0 s: the show plays 100 ms behind the master.
        assert_eq!(e.base_at(0), 100 * MS as i64);
        let media = Sync {
            file_type: FileType::Media,
            ..pkt(Action::Stop, "a", 0.0)
        };
        assert_eq!(f.packet(2_000 * MS, &media), None);
        assert_eq!(f.state, State::Playing("a".into()));
    }
}
