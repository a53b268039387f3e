//! The unit side of `pfx-fleet control` (the dispatcher's `control ...` verbs): the
//! action's words checked (`pfx_api::control::Action`), then handed to the player over
//! its local control socket (root only: the agent runs as root through the fleet
//! account's one sudoers line), and the player's answer relayed with the unit's id.
//!
//! When the player does not answer (stopped, restarting, crash-looping), a `blackout` is
//! still written to the data partition (`pfx_store::held`), so the player starts black,
//! and a `resume` removes it; the answer says the player was not reached.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use pfx_api::control::{Action, ControlAnswer, ControlRequest, ControlState};

/// How long the player has to answer (it waits for the frame that carries the action,
/// and may build an engine for `play`).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest operator name `--by` carries.
pub const MAX_BY: usize = 32;

/// What the verb needs from the agent config.
#[derive(Debug, Clone)]
pub struct ControlOpts {
    pub unit_id: String,
    pub socket: PathBuf,
    pub store_root: PathBuf,
}

/// An operator name as the fleet sends it: 1..=32 of `a-z 0-9 -`, starting with a
/// letter or digit. Pure.
pub fn check_by(w: &str) -> Result<(), String> {
    let ok = !w.is_empty()
        && w.len() <= MAX_BY
        && !w.starts_with('-')
        && w.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "control: --by {w:?}: an operator name of 1 to {MAX_BY} of a-z, 0-9 and - (not starting with -)"
        ))
    }
}

/// The operator's name as a `--by` word: lower case, anything else `-`, at most 32.
pub fn by_word(operator: &str) -> String {
    let s: String = operator
        .chars()
        .take(MAX_BY)
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_start_matches('-');
    if s.is_empty() {
        "operator".into()
    } else {
        s.to_string()
    }
}

/// The words after `control`: the action's, then at most one `--by NAME` at the end.
/// Pure.
pub fn parse(words: &[&str]) -> Result<(Action, String), String> {
    let (action, by) = match words {
        [rest @ .., "--by", name] => {
            check_by(name)?;
            (rest, name.to_string())
        }
        rest => (rest, "fleet".to_string()),
    };
    let a = Action::from_words(action).map_err(|e| format!("control: {e}"))?;
    Ok((a, by))
}

/// The words `parse` reads back to (`action`, `by`).
pub fn render(action: &Action, by: &str) -> String {
    format!("control {} --by {by}", action.describe())
}

fn unreached(o: &ControlOpts, action: &Action, by: &str, from: &str, why: String) -> ControlAnswer {
    let mut a = ControlAnswer {
        unit: o.unit_id.clone(),
        accepted: false,
        reached_player: false,
        error: Some(format!(
            "the player does not answer on {}: {why} (is pfx-player running? `systemctl status pfx-player`)",
            o.socket.display()
        )),
        ..Default::default()
    };
    match action {
        Action::Blackout => {
            let state = ControlState {
                content: Some(Action::Blackout),
                content_by: Some(format!("{by}@{from}")),
                content_since_unix_ms: Some(crate::agent::now_ms()),
                ..Default::default()
            };
            let r = serde_json::to_vec_pretty(&state)
                .map_err(|e| e.to_string())
                .and_then(|b| pfx_store::held::write(&o.store_root, &b).map_err(|e| e.to_string()));
            match r {
                Ok(()) => {
                    a.held_on_disk = Some(true);
                    a.note = Some(
                        "the blackout is kept on the data partition: the player starts black"
                            .into(),
                    );
                    a.state = state;
                }
                Err(e) => {
                    a.held_on_disk = Some(false);
                    a.note = Some(format!("nor could the blackout be kept on disk: {e}"));
                }
            }
        }
        Action::Resume => {
            if let Err(e) = pfx_store::held::clear(&o.store_root) {
                a.note = Some(format!("the held blackout could not be removed: {e}"));
            } else {
                a.note =
                    Some("no blackout is kept on disk: the player starts with its schedule".into());
            }
        }
        _ => {}
    }
    a
}

/// Hands `action` to the player and relays its answer (with this unit's id). The bool:
/// the action was taken.
pub fn run(o: &ControlOpts, action: &Action, by: &str, from: &str) -> (ControlAnswer, bool) {
    let req = ControlRequest {
        action: action.clone(),
        by: by.to_string(),
        from: from.to_string(),
    };
    let line = match serde_json::to_string(&req) {
        Ok(l) => l,
        Err(e) => return (unreached(o, action, by, from, e.to_string()), false),
    };
    let got = (|| -> std::io::Result<String> {
        let mut s = UnixStream::connect(&o.socket)?;
        s.set_read_timeout(Some(ANSWER_TIMEOUT))?;
        s.set_write_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(format!("{line}\n").as_bytes())?;
        let mut answer = String::new();
        std::io::Read::take(BufReader::new(s), 64 * 1024).read_line(&mut answer)?;
        Ok(answer)
    })();
    match got {
        Err(e) => (unreached(o, action, by, from, e.to_string()), false),
        Ok(text) => match serde_json::from_str::<ControlAnswer>(text.trim()) {
            Ok(mut a) => {
                a.unit = o.unit_id.clone();
                let ok = a.accepted;
                (a, ok)
            }
            Err(e) => (
                unreached(
                    o,
                    action,
                    by,
                    from,
                    format!(
                        "its answer is not a control answer ({e}): {:?}",
                        text.trim()
                    ),
                ),
                false,
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_after_control_parse_and_render_back() {
        for (w, by) in [
            ("blackout --by alice", "alice"),
            ("play sponsor --by ops-2", "ops-2"),
            ("brightness 0.5 --by alice", "alice"),
            ("test id --output pole-3 --by alice", "alice"),
            ("resume --by alice", "alice"),
        ] {
            let words: Vec<&str> = w.split(' ').collect();
            let (a, b) = parse(&words).unwrap();
            assert_eq!(b, by);
            assert_eq!(render(&a, &b), format!("control {w}"));
        }
        assert_eq!(parse(&["stop"]).unwrap().1, "fleet");
        for bad in [
            &["blackout", "--by"][..],
            &["blackout", "--by", "Alice"],
            &["blackout", "--by", "a;b"],
            &["blackout", "--by", "-x"],
            &["blackout", "--by", "a", "--by", "b"],
            &["--by", "a", "blackout"],
            &["dim", "--by", "a"],
            &[],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn an_operator_name_becomes_a_by_word() {
        assert_eq!(by_word("Alice.Smith"), "alice-smith");
        assert_eq!(by_word("--x"), "x");
        assert_eq!(by_word(""), "operator");
        assert!(check_by(&by_word(&"é".repeat(50))).is_ok());
    }

    #[test]
    fn a_player_that_does_not_answer_is_said_and_a_blackout_still_kept() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(pfx_store::MARKER), b"").unwrap();
        let o = ControlOpts {
            unit_id: "u1".into(),
            socket: d.path().join("none.sock"),
            store_root: d.path().to_path_buf(),
        };
        let (a, ok) = run(&o, &Action::Blackout, "alice", "10.0.0.5");
        assert!(!ok && !a.accepted && !a.reached_player);
        assert!(a.error.unwrap().contains("does not answer"));
        assert_eq!(a.held_on_disk, Some(true));
        assert!(pfx_store::held::path(d.path()).is_file());
        let (a, _) = run(&o, &Action::Resume, "alice", "10.0.0.5");
        assert!(a.note.unwrap().contains("starts with its schedule"));
        assert!(!pfx_store::held::path(d.path()).exists());
        // Anything else changes nothing on disk.
        let (a, _) = run(&o, &Action::Stop, "alice", "10.0.0.5");
        assert_eq!((a.held_on_disk, a.note), (None, None));
    }
}
