//! What a master sends for the frames it plays. Pure: the loop says which item and frame
//! went out; this says which packets follow (the shell encodes and sends them).
//!
//! FPP's cadence: open and start when a sequence begins, a sync every 4 frames for the
//! first 32 frames and every 10 after that (2–6 per second), stop when it ends.
//!
//! The stop is repeated a few times (every 4 idle frames, `STOP_REPEATS` in all): it is
//! how a master's blackout reaches its remotes (docs/operator-guide.md, "Show night"),
//! and a remote that missed the only one would light on until its `master_lost` timeout
//! (or, with `then: continue`, to the item's end). A remote ignores a stop for a file it
//! does not play, so the repeats change nothing for one that heard the first.

/// Which packets to send after this frame, in this order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Send {
    /// A stop for the item that was playing before (its name is the caller's to keep).
    pub stop_previous: bool,
    pub open: bool,
    pub start: bool,
    pub sync: bool,
}

/// How many stops go out for an item that ended (the first included).
pub const STOP_REPEATS: u32 = 4;
/// Idle frames between two of them.
const STOP_EVERY: u32 = 4;

#[derive(Debug, Clone, Default)]
pub struct Announcer {
    /// The item playing: (show generation, its start on the local clock).
    current: Option<(u64, u64)>,
    last_sync: Option<u32>,
    /// Stops still to repeat for the item that ended, and idle frames since the last.
    stops_left: u32,
    idle_frames: u32,
}

impl Announcer {
    /// After a frame of a sequence went out. An item is known by its show and its start:
    /// a looping playlist's second lap of the same file is a new start.
    pub fn frame(&mut self, show: u64, item_start_ns: u64, frame: u32) -> Send {
        let mut out = Send::default();
        if self.current != Some((show, item_start_ns)) {
            out.stop_previous = self.current.is_some();
            out.open = true;
            out.start = true;
            self.current = Some((show, item_start_ns));
            self.last_sync = None;
            self.stops_left = 0;
        }
        out.sync = match self.last_sync {
            None => true,
            Some(last) if frame < last => true,
            Some(last) => {
                let every = if frame > 32 { 10 } else { 4 };
                frame - last >= every
            }
        };
        if out.sync {
            self.last_sync = Some(frame);
        }
        out
    }

    /// Nothing (or no sequence) plays, or the master is blacked out: stop what did. True
    /// when a stop is due: at the first idle frame, then `STOP_REPEATS - 1` more times.
    pub fn idle(&mut self) -> bool {
        self.last_sync = None;
        if self.current.take().is_some() {
            self.stops_left = STOP_REPEATS - 1;
            self.idle_frames = 0;
            return true;
        }
        if self.stops_left == 0 {
            return false;
        }
        self.idle_frames += 1;
        if !self.idle_frames.is_multiple_of(STOP_EVERY) {
            return false;
        }
        self.stops_left -= 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fpp_cadence_every_4_then_every_10() {
        let mut a = Announcer::default();
        let first = a.frame(1, 100, 0);
        assert_eq!(
            first,
            Send {
                stop_previous: false,
                open: true,
                start: true,
                sync: true
            }
        );
        let synced: Vec<u32> = (1..=80).filter(|f| a.frame(1, 100, *f).sync).collect();
        assert_eq!(synced, vec![4, 8, 12, 16, 20, 24, 28, 32, 42, 52, 62, 72]);
    }

    #[test]
    fn a_skipped_frame_still_syncs_on_cadence() {
        let mut a = Announcer::default();
        a.frame(1, 0, 0);
        assert!(!a.frame(1, 0, 3).sync);
        assert!(a.frame(1, 0, 6).sync, "late loop skipped 4 and 5");
    }

    #[test]
    fn a_new_item_or_lap_stops_the_old_and_opens_the_new() {
        let mut a = Announcer::default();
        a.frame(1, 0, 0);
        let s = a.frame(1, 5_000, 0);
        assert!(s.stop_previous && s.open && s.start && s.sync);
        let s = a.frame(2, 5_000, 3);
        assert!(s.stop_previous && s.start, "a reload is a new start");
        assert!(a.idle());
        assert!(!a.idle(), "the next stop waits its frames");
        let s = a.frame(2, 9_000, 0);
        assert!(!s.stop_previous && s.start);
    }

    #[test]
    fn an_ended_item_is_stopped_a_few_times_then_silence() {
        let mut b = Announcer::default();
        b.frame(1, 0, 0);
        let when: Vec<u32> = (0..40u32).filter(|_| b.idle()).collect();
        assert_eq!(
            when,
            vec![0, 4, 8, 12],
            "the first at once, then every 4 idle frames"
        );
        assert_eq!(when.len() as u32, STOP_REPEATS);
    }
}
