//! RAUC as the agent (and the operator side) calls it: `rauc info`, `rauc install`,
//! `rauc status --detailed`, `rauc status mark-*`. The JSON is RAUC 1.8's
//! (`--output-format=json`, src/main.c `info_formatter_json_base` and
//! `r_status_formatter_json`); parsing it is pure, the runner is a thin shell.

use pfx_api::update::SlotInfo;
use serde::Deserialize;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `rauc info --output-format=json BUNDLE`: the fields pfx reads.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Info {
    pub compatible: String,
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub build: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct BundleJson {
    version: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct InstalledJson {
    timestamp: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct SlotStatusJson {
    bundle: Option<BundleJson>,
    installed: Option<InstalledJson>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct SlotJson {
    bootname: Option<String>,
    state: Option<String>,
    device: Option<String>,
    boot_status: Option<String>,
    slot_status: Option<SlotStatusJson>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct StatusJson {
    compatible: Option<String>,
    booted: Option<String>,
    boot_primary: Option<String>,
    #[serde(default)]
    slots: Vec<BTreeMap<String, SlotJson>>,
}

/// `rauc status --detailed --output-format=json`, as pfx reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    pub compatible: Option<String>,
    /// The booted slot's bootname (RAUC prints what `rauc.slot=` said, which is the
    /// bootname on pfx units; a device path is mapped to its slot's bootname).
    pub booted: Option<String>,
    pub booted_slot: Option<String>,
    /// The primary slot's bootname.
    pub boot_primary: Option<String>,
    pub slots: Vec<SlotInfo>,
}

impl Status {
    pub fn slot_by_bootname(&self, b: &str) -> Option<&SlotInfo> {
        self.slots.iter().find(|s| s.bootname.as_deref() == Some(b))
    }
    /// The other root slot than the booted one (pfx units have exactly two).
    pub fn other(&self) -> Option<&SlotInfo> {
        let booted = self.booted.as_deref()?;
        self.slots
            .iter()
            .find(|s| s.bootname.is_some() && s.bootname.as_deref() != Some(booted))
    }
    pub fn booted_info(&self) -> Option<&SlotInfo> {
        self.slot_by_bootname(self.booted.as_deref()?)
    }
}

/// The JSON object in RAUC's output: its last line that starts with `{` (RAUC's own
/// messages go to stderr, but a wrapper may print more).
fn json_line(out: &str) -> Option<&str> {
    out.lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('{'))
}

/// Parses `rauc info --output-format=json`. Pure.
pub fn parse_info(out: &str) -> Result<Info, String> {
    let line = json_line(out).ok_or("rauc info printed no JSON")?;
    serde_json::from_str(line).map_err(|e| format!("rauc info's JSON: {e}"))
}

/// Parses `rauc status --detailed --output-format=json`. Pure.
pub fn parse_status(out: &str) -> Result<Status, String> {
    let line = json_line(out).ok_or("rauc status printed no JSON")?;
    let j: StatusJson =
        serde_json::from_str(line).map_err(|e| format!("rauc status's JSON: {e}"))?;
    let mut slots = Vec::new();
    let mut booted = None;
    let mut primary = None;
    for m in j.slots {
        for (name, s) in m {
            let bootname = s.bootname.clone();
            let matches = |v: &Option<String>| {
                v.as_deref().is_some_and(|b| {
                    Some(b) == bootname.as_deref() || Some(b) == s.device.as_deref() || b == name
                })
            };
            if matches(&j.booted) {
                booted = Some((name.clone(), bootname.clone()));
            }
            if matches(&j.boot_primary) {
                primary = bootname.clone().or_else(|| Some(name.clone()));
            }
            slots.push(SlotInfo {
                version: s
                    .slot_status
                    .as_ref()
                    .and_then(|x| x.bundle.as_ref())
                    .and_then(|b| b.version.clone()),
                installed: s
                    .slot_status
                    .as_ref()
                    .and_then(|x| x.installed.as_ref())
                    .and_then(|i| i.timestamp.clone()),
                name,
                bootname,
                state: s.state.unwrap_or_default(),
                boot_status: s.boot_status,
            });
        }
    }
    slots.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Status {
        compatible: j.compatible,
        booted: booted.as_ref().and_then(|(_, b)| b.clone()).or(j.booted),
        booted_slot: booted.map(|(n, _)| n),
        boot_primary: primary,
        slots,
    })
}

/// Orders two version strings the way Debian's dpkg does: runs of digits compare as
/// numbers, other runs character by character with letters before other signs, and `~`
/// before everything, even the end (`2.0~rc1` < `2.0` < `2.0.1` < `2.0a`...). Pure.
pub fn version_cmp(a: &str, b: &str) -> Ordering {
    fn order(c: Option<u8>) -> i32 {
        match c {
            Some(b'~') => -1,
            None => 0,
            Some(c) if c.is_ascii_digit() => 0,
            Some(c) if c.is_ascii_alphabetic() => c as i32,
            Some(c) => c as i32 + 256,
        }
    }
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        // The non-digit run.
        while (i < a.len() && !a[i].is_ascii_digit()) || (j < b.len() && !b[j].is_ascii_digit()) {
            let ca = a.get(i).copied().filter(|c| !c.is_ascii_digit());
            let cb = b.get(j).copied().filter(|c| !c.is_ascii_digit());
            let (oa, ob) = (order(ca), order(cb));
            if oa != ob {
                return oa.cmp(&ob);
            }
            if ca.is_some() {
                i += 1;
            }
            if cb.is_some() {
                j += 1;
            }
        }
        // The digit run, as a number (leading zeros ignored, any length).
        let si = i;
        while i < a.len() && a[i].is_ascii_digit() {
            i += 1;
        }
        let sj = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        let na = trim_zeros(&a[si..i]);
        let nb = trim_zeros(&b[sj..j]);
        let c = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
        if c != Ordering::Equal {
            return c;
        }
    }
    Ordering::Equal
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let n = d.iter().take_while(|c| **c == b'0').count();
    &d[n..]
}

/// What one `rauc` run came to.
#[derive(Debug, Clone)]
pub struct Ran {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// RAUC's own words on a failure: its stderr's last non-empty line, else stdout's.
    pub fn why(&self) -> String {
        // `rauc install` ends with "Installing `X` failed"; the reason is its LastError line.
        let last_error = self
            .stderr
            .lines()
            .chain(self.stdout.lines())
            .map(str::trim)
            .find_map(|l| l.strip_prefix("LastError:"))
            .map(|e| e.trim().to_string());
        let pick = |s: &str| {
            s.lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_string)
        };
        let last = pick(&self.stderr)
            .or_else(|| pick(&self.stdout))
            .unwrap_or_else(|| "no message".into());
        match last_error {
            Some(e) if !last.contains(&e) => format!("{last}: {e}"),
            _ => last,
        }
    }
}

/// Runs `rauc ARGS...`, at most `timeout` (then it is killed).
pub fn run(rauc: &Path, args: &[&str], timeout: Duration) -> Result<Ran, String> {
    let mut child = Command::new(rauc)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: {e}", rauc.display()))?;
    // Read both pipes on threads so a chatty RAUC never blocks on a full pipe.
    let read = |p: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = p {
                let mut b = Vec::new();
                let _ = p.read_to_end(&mut b);
                s = String::from_utf8_lossy(&b).into_owned();
            }
            s
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let t0 = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if t0.elapsed() >= timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("{}: {e}", rauc.display())),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Some(s) => Ok(Ran {
            ok: s.success(),
            stdout,
            stderr,
        }),
        None => Err(format!(
            "{} {} did not finish within {} s",
            rauc.display(),
            args.join(" "),
            timeout.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_failed_install_says_its_last_error() {
        let r = super::Ran {
            ok: false,
            stdout: String::new(),
            stderr: "100% Installing failed.\nLastError: Installation error: Failed marking slot rootfs.1 non-bootable\nInstalling `/b.raucb` failed\n".into(),
        };
        assert_eq!(
            r.why(),
            "Installing `/b.raucb` failed: Installation error: Failed marking slot rootfs.1 non-bootable"
        );
        let plain = super::Ran {
            ok: false,
            stdout: String::new(),
            stderr: "signature verification failed\n".into(),
        };
        assert_eq!(plain.why(), "signature verification failed");
    }

    use super::*;

    /// RAUC 1.8's `rauc status --detailed --output-format=json` on a pfx unit (its shape
    /// from src/main.c r_status_formatter_json), after an install into B.
    pub const STATUS_18: &str = r#"{"compatible":"pfx-vm-arm64","variant":null,"booted":"A","boot_primary":"rootfs.0","slots":[{"rootfs.1":{"class":"rootfs","device":"/dev/disk/by-partuuid/1234abcd-03","type":"ext4","bootname":"B","state":"inactive","parent":null,"mountpoint":null,"boot_status":"bad","slot_status":{"bundle":{"compatible":"pfx-vm-arm64","version":"2.0.0"},"checksum":{"sha256":"ab","size":1},"installed":{"timestamp":"2026-12-02T10:00:00Z","count":1},"status":"ok"}}},{"rootfs.0":{"class":"rootfs","device":"/dev/disk/by-partuuid/1234abcd-02","type":"ext4","bootname":"A","state":"booted","parent":null,"mountpoint":"/","boot_status":"good"}}]}"#;

    #[test]
    fn status_json_of_rauc_18_reads() {
        let s = parse_status(&format!("rauc-Message: x\n{STATUS_18}\n")).unwrap();
        assert_eq!(s.compatible.as_deref(), Some("pfx-vm-arm64"));
        assert_eq!(s.booted.as_deref(), Some("A"));
        assert_eq!(s.booted_slot.as_deref(), Some("rootfs.0"));
        assert_eq!(s.boot_primary.as_deref(), Some("A"));
        assert_eq!(s.slots.len(), 2);
        assert_eq!(s.slots[0].name, "rootfs.0");
        assert_eq!(s.slots[0].version, None);
        let b = s.other().unwrap();
        assert_eq!(
            (
                b.bootname.as_deref(),
                b.version.as_deref(),
                b.boot_status.as_deref()
            ),
            (Some("B"), Some("2.0.0"), Some("bad"))
        );
        assert!(parse_status("no json").is_err());
        assert!(parse_status("{\"slots\": 3}").is_err());
        // Booted given as a device path: mapped to its bootname.
        let dev = STATUS_18.replace(
            "\"booted\":\"A\"",
            "\"booted\":\"/dev/disk/by-partuuid/1234abcd-03\"",
        );
        assert_eq!(parse_status(&dev).unwrap().booted.as_deref(), Some("B"));
    }

    #[test]
    fn info_json_reads() {
        let i = parse_info(r#"{"compatible":"pfx-vm-arm64","version":"2.0.0","description":null,"build":"x","hooks":["install-check"],"images":[]}"#).unwrap();
        assert_eq!(
            (i.compatible.as_str(), i.version.as_deref()),
            ("pfx-vm-arm64", Some("2.0.0"))
        );
        assert!(
            parse_info("{\"version\":\"1\"}").is_err(),
            "compatible is required"
        );
    }

    #[test]
    fn versions_order_as_dpkg_does() {
        use Ordering::*;
        for (a, b, want) in [
            ("1.0", "1.0", Equal),
            ("1.0", "1.1", Less),
            ("1.10", "1.9", Greater),
            ("2.0~rc1", "2.0", Less),
            ("2.0", "2.0.1", Less),
            ("2.0", "2.0a", Less),
            ("2.0a", "2.0b", Less),
            ("2.0a", "2.0.0", Less),
            ("010", "10", Equal),
            ("2026.12.02", "2026.12.1", Greater),
            ("99999999999999999999999", "1", Greater),
            ("", "0", Equal),
            ("", "~", Greater),
        ] {
            assert_eq!(version_cmp(a, b), want, "{a} vs {b}");
            assert_eq!(version_cmp(b, a), want.reverse(), "{b} vs {a}");
        }
    }
}
