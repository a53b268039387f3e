//! The unit's NIC as the agent sees it: PAUSE settings and the PAUSE frame counter,
//! through `pfx-player nic ... --json` on a unit, or a file-backed mock in tests
//! (veth refuses PAUSE with EOPNOTSUPP, so there is no real NIC to test against).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pause {
    pub autoneg: bool,
    pub rx: bool,
    pub tx: bool,
}

impl Pause {
    pub const OFF: Pause = Pause {
        autoneg: false,
        rx: false,
        tx: false,
    };
    pub fn is_off(&self) -> bool {
        *self == Self::OFF
    }
}

/// One reading, as read back from the NIC (never what we asked for).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NicReading {
    pub interface: String,
    /// None when the driver does not report PAUSE settings.
    pub pause: Option<Pause>,
    pub pause_error: Option<String>,
    /// Total PAUSE frames received; None = unsupported (never a silent 0).
    pub pause_rx_frames: Option<u64>,
    pub backend: String,
}

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

/// Parses `pfx-player nic status|pause-off IFACE --json`.
pub fn parse_player_json(text: &str) -> Result<NicReading, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let interface = v
        .get("interface")
        .and_then(|x| x.as_str())
        .ok_or("no \"interface\" field")?
        .to_string();
    let pause = match v.get("pause") {
        None | Some(serde_json::Value::Null) => None,
        Some(p) => {
            Some(serde_json::from_value::<Pause>(p.clone()).map_err(|e| format!("pause: {e}"))?)
        }
    };
    let pause_error = v
        .get("pause_error")
        .and_then(|x| x.as_str())
        .map(str::to_string);
    let pause_rx_frames = v
        .get("pause_rx_frames")
        .and_then(|c| c.get("total"))
        .and_then(|t| t.as_u64());
    Ok(NicReading {
        interface,
        pause,
        pause_error,
        pause_rx_frames,
        backend: "pfx-player".into(),
    })
}

pub struct PlayerBackend {
    pub player: PathBuf,
}

impl PlayerBackend {
    fn run(&self, args: &[&str]) -> Result<NicReading, NicError> {
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
        match parse_player_json(&text) {
            Ok(r) => Ok(r),
            Err(detail) if out.status.success() => Err(NicError::Parse { cmd, detail }),
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
        self.run(&["nic", "status", iface, "--json"])
    }
    fn pause_off(&self, iface: &str) -> Result<NicReading, NicError> {
        self.run(&["nic", "pause-off", iface, "--json"])?;
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
    pause: Pause,
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
                pause: Pause {
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
            s.pause = Pause::OFF;
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
/// backward step (driver reset) counts as zero, not as a negative or huge rate.
pub fn frames_per_s(before: Option<u64>, after: Option<u64>, dt_s: f64) -> Option<f64> {
    match (before, after) {
        (Some(a), Some(b)) if dt_s > 0.0 => Some(b.saturating_sub(a) as f64 / dt_s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_player_status_json() {
        let r = parse_player_json(
            r#"{"interface":"eth0","host":"u1","pause":{"autoneg":false,"rx":false,"tx":true},
               "pause_error":null,"pause_rx_frames":{"source":"standard","total":42,"per_s":null}}"#,
        )
        .unwrap();
        assert_eq!(r.interface, "eth0");
        assert_eq!(
            r.pause,
            Some(Pause {
                autoneg: false,
                rx: false,
                tx: true
            })
        );
        assert!(!r.pause.unwrap().is_off());
        assert_eq!(r.pause_rx_frames, Some(42));
        let r = parse_player_json(r#"{"interface":"eth0","pause":null,"pause_error":"EOPNOTSUPP","pause_rx_frames":{"source":"unsupported","total":null}}"#).unwrap();
        assert_eq!(r.pause, None);
        assert_eq!(r.pause_rx_frames, None);
        assert!(parse_player_json("garbage").is_err());
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
    /// that speaks its JSON checks the invocation and the separate readback.
    #[test]
    fn player_backend_with_a_mock_pfx_player_script() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let exe = d.path().join("pfx-player");
        std::fs::write(
            &exe,
            r#"#!/bin/sh
echo "$@" >> "$0.calls"
[ "$3" = bad0 ] && { echo "no such interface" >&2; exit 1; }
case "$2" in
  pause-off) echo '{"interface":"'$3'","pause":{"autoneg":false,"rx":false,"tx":false}}' > "$0.state"; echo '{"interface":"'$3'"}' ;;
  status) if [ -f "$0.state" ]; then cat "$0.state"; else echo '{"interface":"'$3'","pause":{"autoneg":true,"rx":true,"tx":true},"pause_rx_frames":{"source":"standard","total":5,"per_s":null}}'; fi ;;
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
