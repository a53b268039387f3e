//! Live control on a show night (docs/operator-guide.md, "Show night"): the actions an
//! operator takes on a unit now, as `pfx-fleet control`, the agent's `control ...` verbs
//! and the player's local control socket all spell them, and the answers that come back.
//!
//! The words are checked here once, so the fleet refuses a typo before it reaches a unit,
//! the dispatcher accepts only what this parses, and the player reads the same type.
//! What only the unit knows (its playlists, its outputs, its brightness cap) is the
//! player's to check.

use serde::{Deserialize, Serialize};

/// The most any brightness factor can be (the unit's `control.brightness_max` is at most
/// this); the light itself never goes above full.
pub const MAX_FACTOR: f64 = 4.0;
/// The longest playlist or output name a control word may carry.
pub const MAX_NAME: usize = 64;

/// Why a control request is not an action.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ControlError(pub String);

/// A test pattern for commissioning and for finding a pole in the dark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TestPattern {
    /// Pole identification: output i shows i+1 blocks of 5 lit pixels in a colour of its
    /// own, blinking once a second, so a crew under a row can count which output is which.
    Id,
    /// A channel walk: one channel at a time at full (R, G, B of pixel 0, then of pixel
    /// 1, ...), ten channels a second, on every pole at once.
    Walk,
    Red,
    Green,
    Blue,
    White,
}

impl TestPattern {
    pub const ALL: [TestPattern; 6] = [
        TestPattern::Id,
        TestPattern::Walk,
        TestPattern::Red,
        TestPattern::Green,
        TestPattern::Blue,
        TestPattern::White,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TestPattern::Id => "id",
            TestPattern::Walk => "walk",
            TestPattern::Red => "red",
            TestPattern::Green => "green",
            TestPattern::Blue => "blue",
            TestPattern::White => "white",
        }
    }

    /// The colour of a solid pattern (None for the moving ones).
    pub fn solid(self) -> Option<[u8; 3]> {
        match self {
            TestPattern::Red => Some([255, 0, 0]),
            TestPattern::Green => Some([0, 255, 0]),
            TestPattern::Blue => Some([0, 0, 255]),
            TestPattern::White => Some([255, 255, 255]),
            TestPattern::Id | TestPattern::Walk => None,
        }
    }

    pub fn parse(w: &str) -> Result<TestPattern, ControlError> {
        TestPattern::ALL
            .into_iter()
            .find(|p| p.name() == w)
            .ok_or_else(|| {
                ControlError(format!(
                    "unknown test pattern {w:?}; the patterns are {}",
                    choices(TestPattern::ALL.iter().map(|p| p.name()))
                ))
            })
    }
}

/// One live action. Each takes effect at a frame boundary and holds until `resume` or
/// another action of its kind (`brightness` is a layer of its own: it holds under the
/// others, and `resume` ends both).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
pub enum Action {
    /// Every output black now; the show goes on underneath, unseen. Kept on the data
    /// partition: a restarted or rebooted unit comes back black.
    Blackout,
    /// The item playing ends as a graceful stop would; then black.
    Stop,
    /// A playlist of the active show from its start now, once; then black.
    Play { playlist: String },
    /// A multiplier on the show's own brightness (at most the unit's
    /// `control.brightness_max`; the light never goes above full).
    Brightness { factor: f64 },
    /// A test pattern, on one output (`output`, the others black) or on all.
    Test {
        pattern: TestPattern,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<String>,
    },
    /// Back to the schedule and the active show, at full brightness.
    Resume,
}

/// The action words, for messages.
pub const ACTIONS: &str =
    "blackout, stop, play PLAYLIST, brightness F, test PATTERN [--output NAME], resume";

/// `a, b or c`.
pub fn choices<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.into_iter().collect();
    match v.as_slice() {
        [] => "(none)".into(),
        [one] => format!("`{one}`"),
        [init @ .., last] => format!(
            "{} or `{last}`",
            init.iter()
                .map(|s| format!("`{s}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A playlist or output name as a control word: 1..=64 of `A-Z a-z 0-9 _ . -`, not
/// starting with `-` (it would read as an option) or `.`.
pub fn check_name(what: &str, w: &str) -> Result<(), ControlError> {
    let ok = !w.is_empty()
        && w.len() <= MAX_NAME
        && !w.starts_with(['-', '.'])
        && w.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ControlError(format!(
            "{what} {w:?}: a name of 1 to {MAX_NAME} letters, digits, `_`, `.` or `-` (not starting with `-` or `.`)"
        )))
    }
}

/// A brightness factor as written: plain decimal digits with at most one `.` and at most
/// 4 digits after it (no sign, exponent, `inf` or `nan`), 0 ..= [`MAX_FACTOR`]; so it
/// renders back ([`format_factor`]) to the same value.
pub fn parse_factor(w: &str) -> Result<f64, ControlError> {
    let bad = || {
        ControlError(format!(
            "brightness {w:?}: give a factor from 0 to {MAX_FACTOR} such as 0.5 (a multiplier on the show's own brightness; the unit's control.brightness_max caps it)"
        ))
    };
    let digits = w.bytes().filter(u8::is_ascii_digit).count();
    let dots = w.bytes().filter(|b| *b == b'.').count();
    let decimals = w.split_once('.').map_or(0, |(_, d)| d.len());
    if w.is_empty()
        || w.len() > 12
        || digits == 0
        || dots > 1
        || decimals > 4
        || digits + dots != w.len()
    {
        return Err(bad());
    }
    let f: f64 = w.parse().map_err(|_| bad())?;
    if !(0.0..=MAX_FACTOR).contains(&f) {
        return Err(bad());
    }
    Ok(f)
}

impl Action {
    /// Parses the action words (`play evening`, `test id --output pole-3`, ...). Pure.
    pub fn from_words(words: &[&str]) -> Result<Action, ControlError> {
        let unexpected = |what: &str, rest: &[&str]| {
            ControlError(format!("{what}: unexpected {:?}", rest.join(" ")))
        };
        match words {
            ["blackout"] => Ok(Action::Blackout),
            ["stop"] => Ok(Action::Stop),
            ["resume"] => Ok(Action::Resume),
            ["play", name] => {
                check_name("play: playlist", name)?;
                Ok(Action::Play {
                    playlist: name.to_string(),
                })
            }
            ["play"] => Err(ControlError(
                "play: name the playlist (one of the active show's `playlists:`)".into(),
            )),
            ["brightness", f] => Ok(Action::Brightness {
                factor: parse_factor(f)?,
            }),
            ["brightness"] => Err(ControlError("brightness: give a factor such as 0.5".into())),
            ["test", p, rest @ ..] => {
                let pattern = TestPattern::parse(p)?;
                let output = match rest {
                    [] => None,
                    ["--output", name] => {
                        check_name("test --output", name)?;
                        Some(name.to_string())
                    }
                    _ => return Err(unexpected("test", rest)),
                };
                Ok(Action::Test { pattern, output })
            }
            ["test"] => Err(ControlError(format!(
                "test: name the pattern: {}",
                choices(TestPattern::ALL.iter().map(|p| p.name()))
            ))),
            [
                a @ ("blackout" | "stop" | "resume" | "play" | "brightness"),
                rest @ ..,
            ] => Err(unexpected(a, rest)),
            [first, ..] => Err(ControlError(format!(
                "unknown action {first:?}; the actions are {ACTIONS}"
            ))),
            [] => Err(ControlError(format!(
                "no action; the actions are {ACTIONS}"
            ))),
        }
    }

    /// The words `from_words` reads back to this action.
    pub fn words(&self) -> Vec<String> {
        match self {
            Action::Blackout => vec!["blackout".into()],
            Action::Stop => vec!["stop".into()],
            Action::Resume => vec!["resume".into()],
            Action::Play { playlist } => vec!["play".into(), playlist.clone()],
            Action::Brightness { factor } => vec!["brightness".into(), format_factor(*factor)],
            Action::Test { pattern, output } => {
                let mut v = vec!["test".into(), pattern.name().into()];
                if let Some(o) = output {
                    v.push("--output".into());
                    v.push(o.clone());
                }
                v
            }
        }
    }

    /// The words in one string (`test id --output pole-3`).
    pub fn describe(&self) -> String {
        self.words().join(" ")
    }

    /// Whether this action decides what the outputs show (all but `brightness`).
    pub fn is_content(&self) -> bool {
        !matches!(self, Action::Brightness { .. })
    }
}

/// A factor as a word `parse_factor` reads back exactly enough (at most 4 decimals).
pub fn format_factor(f: f64) -> String {
    let s = format!("{f:.4}");
    let s = s.trim_end_matches('0');
    s.strip_suffix('.').unwrap_or(s).to_string()
}

/// What the player is asked over its local control socket (one JSON line).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRequest {
    #[serde(flatten)]
    pub action: Action,
    /// Who asked: the operator's name as the fleet sent it.
    pub by: String,
    /// From where: the SSH client's address, or `local`.
    pub from: String,
}

/// The override a unit holds now (`/profile`'s `control`, the held blackout on the data
/// partition, the agent's answer). None of it means: the schedule and the show play.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlState {
    /// What the outputs show instead of the show: `blackout`, `stop`, `play`, `test`
    /// (None: the show, as the schedule has it).
    pub content: Option<Action>,
    /// When the content override was set (Unix ms) and by whom (`operator@address`).
    pub content_since_unix_ms: Option<u64>,
    pub content_by: Option<String>,
    /// The brightness factor on top of the show's own (None: 1).
    pub brightness: Option<f64>,
    pub brightness_since_unix_ms: Option<u64>,
    pub brightness_by: Option<String>,
}

impl ControlState {
    /// Nothing held: the schedule and the show play as they are.
    pub fn is_clear(&self) -> bool {
        self.content.is_none() && self.brightness.is_none()
    }

    /// One line: `blackout by alice@10.0.0.5 since ...`, for the dashboard, doctor, top.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(c) = &self.content {
            parts.push(format!(
                "{} by {}",
                c.describe(),
                self.content_by.as_deref().unwrap_or("?")
            ));
        }
        if let Some(f) = self.brightness {
            parts.push(format!(
                "brightness {} by {}",
                format_factor(f),
                self.brightness_by.as_deref().unwrap_or("?")
            ));
        }
        if parts.is_empty() {
            "none: the schedule plays".into()
        } else {
            parts.join("; ")
        }
    }
}

/// The answer to a control request: from the player, relayed by the agent with the
/// unit's id, read by the fleet.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ControlAnswer {
    pub unit: String,
    /// The action was taken; false: refused (`error` says why and names the choices) or
    /// not delivered (`reached_player` false), and nothing changed.
    pub accepted: bool,
    pub error: Option<String>,
    /// The player answered (false: it is not running, or not listening).
    pub reached_player: bool,
    /// The unit's clock (Unix µs) at the frame boundary where the action took effect:
    /// the frame whose packets first carried it.
    pub effective_unix_us: Option<u64>,
    /// What the unit holds now.
    pub state: ControlState,
    /// A blackout: whether it is kept on the data partition (survives a restart), and
    /// why not when not.
    pub held_on_disk: Option<bool>,
    pub note: Option<String>,
    /// The unit's part in MultiSync (absent: it plays on its own). The fleet keeps it
    /// from the last answer, to tell a site's masters first (`docs/fleet.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<SyncPart>,
}

/// A unit's part in MultiSync, as its player plays the show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncPart {
    Master,
    Remote,
}

impl Action {
    /// Whether a MultiSync master carries this action to its remotes (a blackout or stop
    /// as a stop and blank, `play` as a sequence change, `resume` as its announce), so
    /// that they change at its frame.
    pub fn carried_by_sync(&self) -> bool {
        matches!(
            self,
            Action::Blackout | Action::Stop | Action::Play { .. } | Action::Resume
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_words_parse_and_render_back() {
        for w in [
            "blackout",
            "stop",
            "resume",
            "play evening",
            "play Sponsor_2.b",
            "brightness 0.5",
            "brightness 0",
            "brightness 4",
            "brightness 1.25",
            "test id",
            "test walk --output pole-3",
            "test red",
            "test white",
        ] {
            let words: Vec<&str> = w.split(' ').collect();
            let a = Action::from_words(&words).unwrap_or_else(|e| panic!("{w}: {e}"));
            assert_eq!(a.describe(), w);
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(serde_json::from_str::<Action>(&json).unwrap(), a);
        }
    }

    #[test]
    fn bad_words_are_refused_naming_the_choices() {
        let e = Action::from_words(&["dim"]).unwrap_err().0;
        assert!(
            e.contains("unknown action \"dim\"") && e.contains("blackout"),
            "{e}"
        );
        let e = Action::from_words(&["test", "rainbow"]).unwrap_err().0;
        assert!(
            e.contains("`id`, `walk`, `red`, `green`, `blue` or `white`"),
            "{e}"
        );
        for f in [
            "-1", "+1", "1e0", "inf", "nan", "4.01", "5", "", ".", "1.2.3", "0x1", " 1", "0.12345",
        ] {
            let e = Action::from_words(&["brightness", f]).unwrap_err().0;
            assert!(e.contains("from 0 to 4"), "{f}: {e}");
        }
        for bad in [
            &["blackout", "now"][..],
            &["play"],
            &["play", "-x"],
            &["play", "a b"],
            &["play", "../x"],
            &["play", "a", "b"],
            &["test", "id", "--output"],
            &["test", "id", "--output", "a", "b"],
            &["test", "id", "--by", "x"],
            &[],
        ] {
            assert!(Action::from_words(bad).is_err(), "{bad:?}");
        }
        assert!(check_name("x", &"a".repeat(64)).is_ok());
        assert!(check_name("x", &"a".repeat(65)).is_err());
    }

    #[test]
    fn a_factor_renders_short_and_reads_back() {
        assert_eq!(format_factor(0.5), "0.5");
        assert_eq!(format_factor(1.0), "1");
        assert_eq!(format_factor(0.0), "0");
        assert_eq!(format_factor(0.33333), "0.3333");
        assert_eq!(parse_factor(&format_factor(0.25)).unwrap(), 0.25);
        for w in ["0.1234", "1.5", "0", "4", "3.9999", "0.0001"] {
            let f = parse_factor(w).unwrap();
            assert_eq!(parse_factor(&format_factor(f)).unwrap(), f, "{w}");
        }
    }

    #[test]
    fn state_summary_names_who() {
        let s = ControlState {
            content: Some(Action::Blackout),
            content_by: Some("alice@10.0.0.5".into()),
            brightness: Some(0.5),
            brightness_by: Some("bob@local".into()),
            ..Default::default()
        };
        assert_eq!(
            s.summary(),
            "blackout by alice@10.0.0.5; brightness 0.5 by bob@local"
        );
        assert!(ControlState::default().is_clear());
    }
}
