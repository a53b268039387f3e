//! The unit's NIC as the agent sees it: PAUSE settings and the PAUSE frame counter,
//! through `pfx-player nic ... --json` on a unit, or a file-backed mock in tests
//! (veth refuses PAUSE with EOPNOTSUPP, so there is no real NIC to test against).

use pfx_api::nic::{NicStatus, PauseOffOutcome, PauseSettings};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The agent's reading, as it goes into its reports (defined in pfx-api).
pub use pfx_api::agent::NicReading;

#[derive(Debug, thiserror::Error)]
pub enum NicError {
    #[error("running `{cmd}`: {detail}")]
    Run { cmd: String, detail: String },
    #[error("`{cmd}` answered something that is not the expected JSON: {detail}")]
    Parse { cmd: String, detail: String },
    #[error("mock NIC file {path}: {detail}")]
    Mock { path: PathBuf, detail: String },
}

pub trait NicBackend {
    fn read(&self, iface: &str) -> Result<NicReading, NicError>;
    /// Sets PAUSE off (only when different) and returns the readback after the set.
    fn pause_off(&self, iface: &str) -> Result<NicReading, NicError>;
}

/// What the agent keeps of `pfx-player nic status IFACE --json`.
pub fn reading_from_status(s: NicStatus) -> NicReading {
    NicReading {
        interface: s.interface,
        pause: s.pause,
        pause_error: s.pause_error,
        pause_rx_frames: s.pause_rx_frames.total,
        backend: "pfx-player".into(),
    }
}

/// Parses `pfx-player nic status IFACE --json` as the typed `NicStatus` it prints.
pub fn parse_player_json(text: &str) -> Result<NicReading, String> {
    serde_json::from_str::<NicStatus>(text)
        .map(reading_from_status)
        .map_err(|e| e.to_string())
}

pub struct PlayerBackend {
    pub player: PathBuf,
}

impl PlayerBackend {
    /// Runs `pfx-player ARGS` and reads its stdout as `T`; when that fails and the exit
    /// status says failure, the error carries the player's stderr instead.
    fn run<T: DeserializeOwned>(&self, args: &[&str]) -> Result<T, NicError> {
        let cmd = format!("{} {}", self.player.display(), args.join(" "));
        let out = Command::new(&self.player)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| NicError::Run {
                cmd: cmd.clone(),
                detail: e.to_string(),
            })?;
        let text = String::from_utf8_lossy(&out.stdout);
        match serde_json::from_str::<T>(&text) {
            Ok(r) => Ok(r),
            Err(e) if out.status.success() => Err(NicError::Parse {
                cmd,
                detail: e.to_string(),
            }),
            Err(_) => Err(NicError::Run {
                cmd,
                detail: format!(
                    "{}: {}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            }),
        }
    }
}

impl NicBackend for PlayerBackend {
    fn read(&self, iface: &str) -> Result<NicReading, NicError> {
        self.run::<NicStatus>(&["nic", "status", iface, "--json"])
            .map(reading_from_status)
    }
    fn pause_off(&self, iface: &str) -> Result<NicReading, NicError> {
        self.run::<PauseOffOutcome>(&["nic", "pause-off", iface, "--json"])?;
        // Verify with a separate read: the set's own answer is not a readback.
        self.read(iface)
    }
}

/// File-backed NIC for tests: `DIR/IFACE.json` holds
/// `{"pause": {...}, "pause_rx_frames": N, "stuck": false}`. A missing file is a fresh
/// unit with PAUSE on. `stuck: true` models a NIC that accepts the set but keeps PAUSE
/// on (what a readback exists to catch).
pub struct MockBackend {
    pub dir: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
struct MockState {
    pause: PauseSettings,
    #[serde(default)]
    pause_rx_frames: u64,
    #[serde(default)]
    stuck: bool,
}

impl MockBackend {
    fn path(&self, iface: &str) -> PathBuf {
        self.dir.join(format!("{iface}.json"))
    }
    fn load(&self, path: &Path) -> Result<MockState, NicError> {
        match std::fs::read_to_string(path) {
            Ok(t) => serde_json::from_str(&t).map_err(|e| NicError::Mock {
                path: path.into(),
                detail: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(MockState {
                pause: PauseSettings {
                    autoneg: true,
                    rx: true,
                    tx: true,
                },
                pause_rx_frames: 0,
                stuck: false,
            }),
            Err(e) => Err(NicError::Mock {
                path: path.into(),
                detail: e.to_string(),
            }),
        }
    }
    fn reading(iface: &str, s: &MockState) -> NicReading {
        NicReading {
            interface: iface.into(),
            pause: Some(s.pause),
            pause_error: None,
            pause_rx_frames: Some(s.pause_rx_frames),
            backend: "mock".into(),
        }
    }
}

impl NicBackend for MockBackend {
    fn read(&self, iface: &str) -> Result<NicReading, NicError> {
        let p = self.path(iface);
        Ok(Self::reading(iface, &self.load(&p)?))
    }
    fn pause_off(&self, iface: &str) -> Result<NicReading, NicError> {
        let p = self.path(iface);
        let mut s = self.load(&p)?;
        if !s.stuck && !s.pause.is_off() {
            s.pause = PauseSettings::OFF;
            let text = serde_json::to_vec(&s).map_err(|e| NicError::Mock {
                path: p.clone(),
                detail: e.to_string(),
            })?;
            crate::atomic::write_atomic(&p, &text).map_err(|e| NicError::Mock {
                path: p.clone(),
                detail: e.to_string(),
            })?;
        }
        self.read(iface)
    }
}

/// PAUSE frames per second between two readings, t read right after the counters. A
/// backward step (driver reset) counts as zero, not as a negative or huge rate: the
/// player's own rule (`pfx_api::nic::rate_per_s`).
pub fn frames_per_s(before: Option<u64>, after: Option<u64>, dt_s: f64) -> Option<f64> {
    pfx_api::nic::rate_per_s(before?, after?, dt_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `nic status --json` as the player prints it (api/tests/golden/nic.json, written by
    /// the player's own test).
    fn golden_status() -> NicStatus {
        serde_json::from_str(&pfx_api::golden::read("nic.json")).unwrap()
    }

    #[test]
    fn reads_the_players_golden_status() {
        let r = parse_player_json(&pfx_api::golden::read("nic.json")).unwrap();
        assert_eq!(
            r,
            NicReading {
                interface: "eth0".into(),
                pause: Some(PauseSettings {
                    autoneg: false,
                    rx: false,
                    tx: true
                }),
                pause_error: None,
                pause_rx_frames: Some(2_400_000),
                backend: "pfx-player".into(),
            }
        );
    }

    #[test]
    fn parses_player_status_json() {
        let mut s = golden_status();
        s.pause = Some(PauseSettings {
            autoneg: false,
            rx: false,
            tx: true,
        });
        s.pause_rx_frames.total = Some(42);
        let r = parse_player_json(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(r.interface, "eth0");
        assert_eq!(
            r.pause,
            Some(PauseSettings {
                autoneg: false,
                rx: false,
                tx: true
            })
        );
        assert!(!r.pause.unwrap().is_off());
        assert_eq!(r.pause_rx_frames, Some(42));
        s.pause = None;
        s.pause_error = Some("EOPNOTSUPP".into());
        s.pause_rx_frames = pfx_api::nic::CounterReading::unsupported();
        let r = parse_player_json(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(r.pause, None);
        assert_eq!(r.pause_rx_frames, None);
        assert!(parse_player_json("garbage").is_err());
        // A document that is not a NicStatus (a key renamed) is an error, not a reading.
        let renamed = pfx_api::golden::read("nic.json").replace("\"pause_tx_frames\"", "\"ptx\"");
        assert!(parse_player_json(&renamed).is_err());
    }

    #[test]
    fn mock_nic_pause_off_and_stuck_nic() {
        let d = tempfile::tempdir().unwrap();
        let m = MockBackend {
            dir: d.path().into(),
        };
        assert!(!m.read("eth0").unwrap().pause.unwrap().is_off());
        assert!(m.pause_off("eth0").unwrap().pause.unwrap().is_off());
        std::fs::write(
            d.path().join("eth1.json"),
            r#"{"pause":{"autoneg":true,"rx":true,"tx":true},"stuck":true}"#,
        )
        .unwrap();
        assert!(!m.pause_off("eth1").unwrap().pause.unwrap().is_off());
    }

    /// The real `pfx-player nic` cannot run here (no PAUSE-capable NIC): a MOCK script
    /// that prints the player's real JSON (golden `NicStatus`, a `PauseOffOutcome`) checks
    /// the invocation and the separate readback.
    #[test]
    fn player_backend_with_a_mock_pfx_player_script() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let on = PauseSettings {
            autoneg: true,
            rx: true,
            tx: true,
        };
        let mut st = golden_status();
        st.pause = Some(on);
        st.pause_rx_frames.total = Some(5);
        let write = |name: &str, text: String| std::fs::write(d.path().join(name), text).unwrap();
        write("on.json", serde_json::to_string_pretty(&st).unwrap());
        st.pause = Some(PauseSettings::OFF);
        write("off.json", serde_json::to_string_pretty(&st).unwrap());
        let outcome = PauseOffOutcome {
            interface: "eth0".into(),
            driver: "bcmgenet".into(),
            before: on,
            after: PauseSettings::OFF,
            changed: true,
            retries: 0,
            waited_s: 0.5,
            carrier: Some(true),
            note: None,
        };
        write(
            "outcome.json",
            serde_json::to_string_pretty(&outcome).unwrap(),
        );
        let exe = d.path().join("pfx-player");
        std::fs::write(
            &exe,
            r#"#!/bin/sh
dir=$(dirname "$0")
echo "$@" >> "$0.calls"
[ "$3" = bad0 ] && { echo "no such interface" >&2; exit 1; }
case "$2" in
  pause-off) cp "$dir/off.json" "$0.state"; cat "$dir/outcome.json" ;;
  status) if [ -f "$0.state" ]; then cat "$0.state"; else cat "$dir/on.json"; fi ;;
esac
"#,
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let b = PlayerBackend {
            player: exe.clone(),
        };
        let r = b.read("eth0").unwrap();
        assert_eq!(
            (r.pause.unwrap().is_off(), r.pause_rx_frames),
            (false, Some(5))
        );
        assert!(b.pause_off("eth0").unwrap().pause.unwrap().is_off());
        let calls = std::fs::read_to_string(d.path().join("pfx-player.calls")).unwrap();
        assert_eq!(
            calls,
            "nic status eth0 --json\nnic pause-off eth0 --json\nnic status eth0 --json\n"
        );
        let e = b.read("bad0").unwrap_err().to_string();
        assert!(e.contains("no such interface"), "{e}");
    }

    #[test]
    fn rate_clamps_counter_resets() {
        assert_eq!(frames_per_s(Some(10), Some(30), 2.0), Some(10.0));
        assert_eq!(frames_per_s(Some(500), Some(3), 1.0), Some(0.0));
        assert_eq!(frames_per_s(None, Some(3), 1.0), None);
    }
}
