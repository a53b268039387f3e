//! Live control's decisions (docs/operator-guide.md, "Show night"). Pure: the state held
//! now, the action asked for and what the show offers in; the new state, what the render
//! thread does with each frame and what the supervisor does about the engine out. No
//! clock (the caller passes the time), no I/O.
//!
//! Two layers: the *content* (blackout, stop, play, test; None: the show as the schedule
//! has it) and the *brightness* factor. An action replaces its own layer and keeps the
//! other; `resume` clears both.

use pfx_api::control::{Action, ControlState, TestPattern, choices, format_factor};

use crate::config::show::PatternKind;

/// What the render thread does with every frame while an override holds. Plain data,
/// built off the render thread and handed over whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlay {
    /// Every output sends black (the show goes on underneath, unseen).
    pub black: bool,
    /// The brightness factor on the show's own level (1.0: none).
    pub factor: f32,
    /// A test pattern in place of the show.
    pub test: Option<TestRender>,
}

impl Default for Overlay {
    fn default() -> Self {
        Overlay {
            black: false,
            factor: 1.0,
            test: None,
        }
    }
}

/// A test pattern as the render thread draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRender {
    pub kind: PatternKind,
    pub color: [u8; 3],
    /// Only this output shows it (the others black); None: every output.
    pub output: Option<String>,
}

/// What the supervisor does about the engine for an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineChange {
    /// The engine plays on (the override is the render thread's alone).
    Keep,
    /// This playlist of the show from its start now, once, then black.
    Play(String),
    /// Black when the item playing ends (a graceful stop).
    StopAfterItem,
    /// The schedule's (or the show's) own engine again, now.
    BackToSchedule,
}

/// Whether the held-blackout file on the data partition is written, removed or left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    Write,
    Clear,
    Leave,
}

/// What the show offers an action.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// The playlists `play` may name.
    pub playlists: Vec<String>,
    /// The outputs `test --output` may name.
    pub outputs: Vec<String>,
    /// The unit's `control.brightness_max`.
    pub brightness_max: f32,
    /// A MultiSync remote: it plays what its master plays (no `play` or `stop` here).
    pub remote: bool,
}

/// The outcome of an accepted action.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub state: ControlState,
    pub overlay: Overlay,
    pub engine: EngineChange,
    pub persist: Persist,
}

/// The name `play` takes for an unscheduled show's `content.playlist`.
pub const CONTENT_PLAYLIST: &str = "content";

/// The test pattern as the render thread draws it.
pub fn test_render(p: TestPattern) -> (PatternKind, [u8; 3]) {
    match p {
        TestPattern::Id => (PatternKind::Id, [0; 3]),
        TestPattern::Walk => (PatternKind::Walk, [0; 3]),
        solid => (PatternKind::Solid, solid.solid().unwrap_or([0; 3])),
    }
}

/// Whether `state`'s content replaced the engine (the schedule waits until `resume`).
pub fn holds_engine(state: &ControlState) -> bool {
    matches!(state.content, Some(Action::Stop | Action::Play { .. }))
}

/// What the render thread does for `state`.
pub fn overlay_for(state: &ControlState) -> Overlay {
    Overlay {
        black: matches!(state.content, Some(Action::Blackout)),
        factor: state.brightness.map_or(1.0, |f| f as f32),
        test: match &state.content {
            Some(Action::Test { pattern, output }) => {
                let (kind, color) = test_render(*pattern);
                Some(TestRender {
                    kind,
                    color,
                    output: output.clone(),
                })
            }
            _ => None,
        },
    }
}

/// Whether output `index` sends black this frame: a blackout, or a test pattern meant
/// for another output (`only`: the index the test's output name resolved to; None with
/// a name that no output has any more, after a reload: then every output is dark).
pub fn output_dark(overlay: &Overlay, only: Option<usize>, index: usize) -> bool {
    if overlay.black {
        return true;
    }
    match &overlay.test {
        Some(TestRender {
            output: Some(_), ..
        }) => only != Some(index),
        _ => false,
    }
}

/// Decides `action` against the state held now. `by` is who asked (`operator@address`),
/// `now_ms` the Unix time. Refused with the reason and the choices; the state is the
/// caller's and changes only with an accepted plan.
pub fn decide(
    cur: &ControlState,
    action: &Action,
    ctx: &Context,
    by: &str,
    now_ms: u64,
) -> Result<Plan, String> {
    let remote_refusal = |what: &str| {
        format!(
            "{what}: this unit is a MultiSync remote and plays what its master plays; act on the master (blackout, brightness, test and resume work here)"
        )
    };
    match action {
        Action::Play { playlist } => {
            if ctx.remote {
                return Err(remote_refusal("play"));
            }
            if !ctx.playlists.iter().any(|p| p == playlist) {
                return Err(format!(
                    "play: no playlist {playlist:?} in the show this unit plays; its playlists are {}",
                    choices(ctx.playlists.iter().map(String::as_str))
                ));
            }
        }
        Action::Stop if ctx.remote => return Err(remote_refusal("stop")),
        Action::Brightness { factor } => {
            let cap = f64::from(ctx.brightness_max);
            if !(factor.is_finite() && *factor >= 0.0 && *factor <= cap + 1e-9) {
                return Err(format!(
                    "brightness {}: this unit's control.brightness_max is {}; give 0 to {}",
                    format_factor(*factor),
                    format_factor(cap),
                    format_factor(cap)
                ));
            }
        }
        Action::Test {
            output: Some(o), ..
        } if !ctx.outputs.iter().any(|n| n == o) => {
            return Err(format!(
                "test --output: no output {o:?} in the show; its outputs are {}",
                choices(ctx.outputs.iter().map(String::as_str))
            ));
        }
        _ => {}
    }
    let mut state = cur.clone();
    match action {
        Action::Resume => state = ControlState::default(),
        Action::Brightness { factor } => {
            state.brightness = Some(*factor);
            state.brightness_since_unix_ms = Some(now_ms);
            state.brightness_by = Some(by.to_string());
        }
        content => {
            state.content = Some(content.clone());
            state.content_since_unix_ms = Some(now_ms);
            state.content_by = Some(by.to_string());
        }
    }
    let engine = match action {
        Action::Play { playlist } => EngineChange::Play(playlist.clone()),
        Action::Stop => EngineChange::StopAfterItem,
        Action::Brightness { .. } => EngineChange::Keep,
        // Blackout, test and resume after a play or a stop: the schedule's show again
        // (underneath the blackout or the pattern).
        _ if holds_engine(cur) => EngineChange::BackToSchedule,
        _ => EngineChange::Keep,
    };
    let was_black = matches!(cur.content, Some(Action::Blackout));
    let persist = match &state.content {
        Some(Action::Blackout) => Persist::Write,
        _ if was_black => Persist::Clear,
        _ => Persist::Leave,
    };
    Ok(Plan {
        overlay: overlay_for(&state),
        state,
        engine,
        persist,
    })
}

/// A held blackout read back from the data partition at start: only a blackout is kept
/// (with the brightness under it); anything else in the file is not applied.
pub fn restore(held: ControlState) -> Option<ControlState> {
    matches!(held.content, Some(Action::Blackout)).then_some(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context {
            playlists: vec!["evening".into(), "sponsor".into()],
            outputs: vec!["pole-1".into(), "pole-2".into()],
            brightness_max: 1.0,
            remote: false,
        }
    }

    fn go(cur: &ControlState, a: Action) -> Plan {
        decide(cur, &a, &ctx(), "alice@10.0.0.5", 1000).unwrap()
    }

    #[test]
    fn blackout_is_black_everywhere_kept_on_disk_and_resume_clears_it() {
        let p = go(&ControlState::default(), Action::Blackout);
        assert!(p.overlay.black);
        assert_eq!(p.persist, Persist::Write);
        assert_eq!(p.engine, EngineChange::Keep, "the show goes on underneath");
        assert_eq!(p.state.content_by.as_deref(), Some("alice@10.0.0.5"));
        assert_eq!(p.state.content_since_unix_ms, Some(1000));
        assert!(output_dark(&p.overlay, None, 0) && output_dark(&p.overlay, None, 1));
        let r = go(&p.state, Action::Resume);
        assert!(r.state.is_clear());
        assert_eq!(r.overlay, Overlay::default());
        assert_eq!(r.persist, Persist::Clear);
        assert_eq!(r.engine, EngineChange::Keep);
        // Another action replaces the blackout, and the file goes with it.
        let t = go(
            &p.state,
            Action::Test {
                pattern: TestPattern::Id,
                output: None,
            },
        );
        assert!(!t.overlay.black);
        assert_eq!(t.persist, Persist::Clear);
    }

    #[test]
    fn brightness_is_a_layer_of_its_own_capped_by_the_unit() {
        let b = go(&ControlState::default(), Action::Brightness { factor: 0.3 });
        assert_eq!(b.overlay.factor, 0.3);
        assert_eq!(b.persist, Persist::Leave);
        let k = go(&b.state, Action::Blackout);
        assert!(k.overlay.black);
        assert_eq!(k.overlay.factor, 0.3, "kept under the blackout");
        // A brightness change under a held blackout rewrites the held file.
        assert_eq!(
            go(&k.state, Action::Brightness { factor: 0.5 }).persist,
            Persist::Write
        );
        let e = decide(
            &b.state,
            &Action::Brightness { factor: 1.5 },
            &ctx(),
            "x",
            1,
        )
        .unwrap_err();
        assert!(e.contains("brightness_max is 1; give 0 to 1"), "{e}");
        let mut c = ctx();
        c.brightness_max = 2.0;
        assert!(decide(&b.state, &Action::Brightness { factor: 1.5 }, &c, "x", 1).is_ok());
        assert!(
            decide(
                &b.state,
                &Action::Brightness { factor: f64::NAN },
                &c,
                "x",
                1
            )
            .is_err()
        );
    }

    #[test]
    fn play_and_stop_take_the_engine_and_give_it_back() {
        let p = go(
            &ControlState::default(),
            Action::Play {
                playlist: "sponsor".into(),
            },
        );
        assert_eq!(p.engine, EngineChange::Play("sponsor".into()));
        assert!(holds_engine(&p.state));
        assert_eq!(p.overlay, Overlay::default());
        assert_eq!(
            go(&p.state, Action::Resume).engine,
            EngineChange::BackToSchedule
        );
        assert_eq!(
            go(&p.state, Action::Blackout).engine,
            EngineChange::BackToSchedule
        );
        assert_eq!(
            go(&p.state, Action::Brightness { factor: 0.5 }).engine,
            EngineChange::Keep,
            "a dimmed play plays on"
        );
        let s = go(&ControlState::default(), Action::Stop);
        assert_eq!(s.engine, EngineChange::StopAfterItem);
        assert!(holds_engine(&s.state));
    }

    #[test]
    fn bad_input_is_refused_naming_the_choices() {
        let cur = go(&ControlState::default(), Action::Blackout).state;
        let e = decide(
            &cur,
            &Action::Play {
                playlist: "encore".into(),
            },
            &ctx(),
            "x",
            1,
        )
        .unwrap_err();
        assert!(
            e.contains("no playlist \"encore\"") && e.contains("`evening` or `sponsor`"),
            "{e}"
        );
        let e = decide(
            &cur,
            &Action::Test {
                pattern: TestPattern::Red,
                output: Some("pole-9".into()),
            },
            &ctx(),
            "x",
            1,
        )
        .unwrap_err();
        assert!(e.contains("`pole-1` or `pole-2`"), "{e}");
        let mut remote = ctx();
        remote.remote = true;
        for a in [
            Action::Stop,
            Action::Play {
                playlist: "evening".into(),
            },
        ] {
            let e = decide(&cur, &a, &remote, "x", 1).unwrap_err();
            assert!(e.contains("MultiSync remote"), "{e}");
        }
        assert!(decide(&cur, &Action::Blackout, &remote, "x", 1).is_ok());
    }

    #[test]
    fn a_test_on_one_output_darkens_the_others() {
        let t = go(
            &ControlState::default(),
            Action::Test {
                pattern: TestPattern::Green,
                output: Some("pole-2".into()),
            },
        );
        let tr = t.overlay.test.clone().unwrap();
        assert_eq!((tr.kind, tr.color), (PatternKind::Solid, [0, 255, 0]));
        assert!(output_dark(&t.overlay, Some(1), 0));
        assert!(!output_dark(&t.overlay, Some(1), 1));
        assert!(output_dark(&t.overlay, None, 1), "its output is gone");
        let all = overlay_for(&ControlState {
            content: Some(Action::Test {
                pattern: TestPattern::Walk,
                output: None,
            }),
            ..Default::default()
        });
        assert!(!output_dark(&all, None, 0));
        assert_eq!(test_render(TestPattern::Id).0, PatternKind::Id);
    }

    #[test]
    fn only_a_blackout_is_restored_at_start() {
        let black = go(&ControlState::default(), Action::Blackout).state;
        assert_eq!(restore(black.clone()), Some(black));
        let test = go(
            &ControlState::default(),
            Action::Test {
                pattern: TestPattern::Id,
                output: None,
            },
        )
        .state;
        assert_eq!(restore(test), None);
    }
}
