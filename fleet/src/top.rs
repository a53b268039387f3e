//! `pfx-fleet top`: one live row per unit, read from each unit's read-only `/profile`.
//!
//! The core is pure: [`row`] turns a unit and what its `/profile` gave (the typed document,
//! or why there was none) into a [`TopRow`], and [`render`] turns rows into the table. The
//! shell around it ([`fetch`], [`poll`]) does the HTTP, a bounded pool of threads with a
//! per-unit timeout, so one dead unit never holds up the others.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pfx_api::http::{self, HttpError};
use pfx_api::profile::ProfileDoc;
use serde::{Deserialize, Serialize};

/// The player's HTTP port when nothing else says (`http.port` of a show config defaults to it).
pub const DEFAULT_HTTP_PORT: u16 = 8080;

/// One unit to ask: its id and where its `/profile` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopUnit {
    pub unit: String,
    pub host: String,
    pub http_port: u16,
    /// The unit's software version (its booted slot's) as it last read back to `push
    /// update` (the state database): `/profile` does not carry it.
    pub software: Option<String>,
}

impl TopUnit {
    pub fn base_url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.http_port)
        } else {
            format!("http://{}:{}", self.host, self.http_port)
        }
    }
}

/// What the unit's mDNS answer recorded (`discover` keeps its TXT record as JSON); only
/// the HTTP port matters here.
#[derive(Debug, Deserialize)]
struct DiscoveredTxt {
    http_port: Option<u16>,
}

/// The HTTP port a discovered unit announced, else `fallback`.
pub fn http_port_from_txt(txt: Option<&str>, fallback: u16) -> u16 {
    txt.and_then(|t| serde_json::from_str::<DiscoveredTxt>(t).ok())
        .and_then(|d| d.http_port)
        .unwrap_or(fallback)
}

/// Why a unit gave no `/profile` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DownKind {
    /// Nothing listens on the port (the player is not running, or another port).
    ConnectionRefused,
    /// No answer within the per-unit timeout (the unit is off, or the network is).
    TimedOut,
    /// Something answered, but not with a pfx `/profile` document.
    NotProfile,
    /// The server answered with another HTTP status than 200.
    HttpStatus,
    /// Anything else: the name did not resolve, the network is unreachable, ...
    Unreachable,
}

impl DownKind {
    pub fn label(&self) -> &'static str {
        match self {
            DownKind::ConnectionRefused => "connection refused",
            DownKind::TimedOut => "timed out",
            DownKind::NotProfile => "not a pfx /profile document",
            DownKind::HttpStatus => "HTTP status",
            DownKind::Unreachable => "unreachable",
        }
    }
}

/// A unit that did not answer: the kind, and the detail as the client said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Down {
    pub kind: DownKind,
    pub detail: String,
}

/// One row of `pfx-fleet top` (and one element of `--json`). `None` means "not known":
/// the unit did not answer, or its document does not carry that value.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TopRow {
    pub unit: String,
    pub url: String,
    pub answered: bool,
    /// What the unit plays: the show's name from `/profile`'s `show`, with " (config)"
    /// when it is the config show rather than the store's; `None` ("-") from a player
    /// that does not say.
    pub playing: Option<String>,
    /// The unit id the document names (may differ from `unit` when the address is wrong).
    pub answered_as: Option<String>,
    pub health: Option<String>,
    pub fps: Option<f64>,
    pub fps_target: Option<u32>,
    /// In the rolling window.
    pub deadline_misses: Option<u64>,
    /// The rolling window's p99 of the `wire_send` stage, µs.
    pub wire_send_p99_us: Option<f64>,
    /// PAUSE frames received per second on the show interface.
    pub pause_rx_per_s: Option<f64>,
    /// A sync remote's offset from its master, ms (its `/profile` sync section); `None`
    /// for a master, a standalone unit, or a remote that has not heard its master yet.
    pub sync_offset_ms: Option<f64>,
    /// The software version recorded for the unit (see [`TopUnit::software`]).
    pub software: Option<String>,
    /// The live override the unit holds (`/profile`'s `control`): what, who, since when
    /// (see [`override_text`]); `None` when the schedule plays.
    #[serde(rename = "override")]
    pub live_override: Option<String>,
    /// Why the unit did not answer (`None` when it did).
    pub down: Option<DownKind>,
    pub reason: Option<String>,
}

/// Sorts a client error into a kind. The client's errors carry the OS's words; these are
/// the ones Linux uses for a refused connection and for a timeout.
pub fn classify(e: &HttpError) -> Down {
    let detail = e.to_string();
    let kind = match e {
        HttpError::Status { .. } => DownKind::HttpStatus,
        HttpError::Malformed { .. } => DownKind::NotProfile,
        HttpError::Connect { reason, .. } | HttpError::Io { reason, .. } => {
            let r = reason.to_ascii_lowercase();
            if r.contains("refused") {
                DownKind::ConnectionRefused
            } else if r.contains("timed out")
                || r.contains("no complete answer")
                || r.contains("would block")
                || r.contains("temporarily unavailable")
            {
                DownKind::TimedOut
            } else {
                DownKind::Unreachable
            }
        }
        HttpError::Scheme { .. } | HttpError::Port { .. } | HttpError::Resolve { .. } => {
            DownKind::Unreachable
        }
    };
    Down { kind, detail }
}

/// Reads the body as the typed `/profile` document; anything else is `NotProfile`.
pub fn parse_profile(url: &str, body: &[u8]) -> Result<ProfileDoc, Down> {
    serde_json::from_slice::<ProfileDoc>(body).map_err(|e| Down {
        kind: DownKind::NotProfile,
        detail: format!("{url}/profile: not a pfx /profile document: {e}"),
    })
}

/// The row for one unit: pure.
pub fn row(unit: &TopUnit, got: &Result<ProfileDoc, Down>) -> TopRow {
    let url = unit.base_url();
    match got {
        Ok(d) => {
            let s = &d.snapshot;
            TopRow {
                unit: unit.unit.clone(),
                url,
                answered: true,
                playing: d.show.as_ref().map(|sh| match sh.source {
                    pfx_api::show::ShowSource::Store => sh.name.clone(),
                    pfx_api::show::ShowSource::Config => format!("{} (config)", sh.name),
                }),
                answered_as: Some(d.unit.clone()),
                health: Some(d.health.clone()),
                fps: Some(s.fps),
                fps_target: Some(s.fps_target),
                deadline_misses: Some(s.deadline_misses),
                wire_send_p99_us: s.stages.get("wire_send").map(|w| w.p99_us),
                pause_rx_per_s: s.nic.as_ref().and_then(|n| n.pause_rx_frames.per_s),
                sync_offset_ms: s
                    .sync
                    .as_ref()
                    .filter(|y| y.role == "remote")
                    .and_then(|y| y.offset_ms),
                software: unit.software.clone(),
                live_override: d.control.as_ref().and_then(override_text),
                down: None,
                reason: None,
            }
        }
        Err(e) => TopRow {
            unit: unit.unit.clone(),
            url,
            answered: false,
            playing: None,
            answered_as: None,
            health: None,
            fps: None,
            fps_target: None,
            deadline_misses: None,
            wire_send_p99_us: None,
            pause_rx_per_s: None,
            sync_offset_ms: None,
            software: unit.software.clone(),
            live_override: None,
            down: Some(e.kind.clone()),
            reason: Some(e.detail.clone()),
        },
    }
}

/// The override as `top` shows it: each layer's action, who set it and since when (the
/// unit's clock, UTC), `;` between the two layers; `None` when nothing is held. Pure.
pub fn override_text(c: &pfx_api::control::ControlState) -> Option<String> {
    let since = |ms: Option<u64>| {
        ms.map(|ms| {
            let t = crate::gate::utc_us(ms * 1000);
            // `YYYY-MM-DD HH:MM:SS.ffffff UTC`: the time to the second is enough here.
            format!(" since {} UTC", t.get(..19).unwrap_or(&t))
        })
        .unwrap_or_default()
    };
    let mut parts = Vec::new();
    if let Some(a) = &c.content {
        parts.push(format!(
            "{} by {}{}",
            a.describe(),
            c.content_by.as_deref().unwrap_or("?"),
            since(c.content_since_unix_ms)
        ));
    }
    if let Some(f) = c.brightness {
        parts.push(format!(
            "brightness {} by {}{}",
            pfx_api::control::format_factor(f),
            c.brightness_by.as_deref().unwrap_or("?"),
            since(c.brightness_since_unix_ms)
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// The table: a header and one line per row, no trailing newline on the last line. A unit
/// that did not answer says `DOWN` and why in the last column.
pub fn render(rows: &[TopRow]) -> String {
    let w = rows
        .iter()
        .map(|r| r.unit.chars().count())
        .max()
        .unwrap_or(0)
        .max(4);
    let mut out = format!(
        "{:<w$} {:<5} {:<16} {:>7} {:>6} {:>10} {:>8} {:>9}  {:<10} health",
        "unit", "state", "playing", "fps", "misses", "wire p99", "PAUSE/s", "sync off", "software"
    );
    for r in rows {
        out.push('\n');
        if r.answered {
            let mut health = r.health.clone().unwrap_or_default();
            if let Some(a) = &r.answered_as
                && a != &r.unit
            {
                health.push_str(&format!(" (answers as {a})"));
            }
            // Last, where a long line may run on: what an operator set, who and since when.
            if let Some(o) = &r.live_override {
                health.push_str(&format!("  OVERRIDE {o}"));
            }
            out.push_str(&format!(
                "{:<w$} {:<5} {:<16} {:>7} {:>6} {:>10} {:>8} {:>9}  {:<10} {}",
                r.unit,
                "up",
                opt(r.playing.as_deref(), |p| p.chars().take(16).collect()),
                opt(r.fps, |f| format!("{f:.2}")),
                opt(r.deadline_misses, |m| m.to_string()),
                opt(r.wire_send_p99_us, |u| if u >= 10_000.0 {
                    format!("{:.1} ms", u / 1000.0)
                } else {
                    format!("{u:.0} µs")
                }),
                opt(r.pause_rx_per_s, |p| format!("{p:.0}")),
                opt(r.sync_offset_ms, |o| format!("{o:+.2} ms")),
                r.software.as_deref().unwrap_or("-"),
                health
            ));
        } else {
            out.push_str(&format!(
                "{:<w$} {:<5} {}: {}",
                r.unit,
                "DOWN",
                r.down.as_ref().map(|k| k.label()).unwrap_or("no answer"),
                r.reason.as_deref().unwrap_or("")
            ));
        }
    }
    out
}

/// One GET of the unit's `/profile`, read as the typed document.
pub fn fetch(unit: &TopUnit, timeout: Duration) -> Result<ProfileDoc, Down> {
    let url = unit.base_url();
    let r = http::request_path("GET", &url, "/profile", &[], None, timeout)
        .and_then(|r| r.ok_body(&format!("{url}/profile")))
        .map_err(|e| classify(&e))?;
    parse_profile(&url, &r)
}

/// Asks every unit at once through at most `parallel` threads, each request bounded by
/// `timeout` (to connect, and then per read). Rows come back in the order of `units`.
pub fn poll(units: &[TopUnit], parallel: usize, timeout: Duration) -> Vec<TopRow> {
    poll_with(units, parallel, |u| fetch(u, timeout))
}

/// `poll` with the fetch given, so the pool can be tested with a fake one.
pub fn poll_with<F>(units: &[TopUnit], parallel: usize, fetch: F) -> Vec<TopRow>
where
    F: Fn(&TopUnit) -> Result<ProfileDoc, Down> + Sync,
{
    let slots: Vec<Mutex<Option<TopRow>>> = units.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let workers = parallel.clamp(1, units.len().max(1));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(u) = units.get(i) else { break };
                    let r = row(u, &fetch(u));
                    if let Ok(mut slot) = slots[i].lock() {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    units
        .iter()
        .zip(slots)
        .map(|(u, s)| {
            s.into_inner().ok().flatten().unwrap_or_else(|| {
                row(
                    u,
                    &Err(Down {
                        kind: DownKind::Unreachable,
                        detail: "the poll thread for this unit failed".into(),
                    }),
                )
            })
        })
        .collect()
}

/// The terminal side of the live view: raw-ish input (no line buffering, no echo) so `q`
/// arrives at once, ANSI redraws in place, and the terminal put back however the view ends.
pub mod term {
    use std::io::Write;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};

    pub fn is_tty(fd: i32) -> bool {
        // SAFETY: isatty only inspects the descriptor.
        unsafe { libc::isatty(fd) == 1 }
    }

    /// Holds the terminal in the live view's mode; `Drop` restores it (also on an error
    /// return), shows the cursor again and leaves the last table on screen.
    pub struct Screen {
        saved: Option<libc::termios>,
    }

    impl Screen {
        /// Takes over the terminal: stdin without line buffering or echo when it is a
        /// terminal (Ctrl-C still raises SIGINT), the cursor hidden, the screen cleared.
        pub fn enter() -> Screen {
            let mut saved = None;
            if is_tty(0) {
                // SAFETY: a zeroed termios is a valid out-parameter; tcgetattr fills it.
                let mut t: libc::termios = unsafe { std::mem::zeroed() };
                // SAFETY: fd 0 is a terminal (checked), `t` is a valid termios.
                if unsafe { libc::tcgetattr(0, &mut t) } == 0 {
                    let orig = t;
                    t.c_lflag &= !(libc::ICANON | libc::ECHO);
                    t.c_cc[libc::VMIN] = 0;
                    t.c_cc[libc::VTIME] = 0;
                    // SAFETY: as above.
                    if unsafe { libc::tcsetattr(0, libc::TCSANOW, &t) } == 0 {
                        saved = Some(orig);
                    }
                }
            }
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(b"\x1b[?25l\x1b[2J\x1b[H");
            let _ = o.flush();
            Screen { saved }
        }

        /// Redraws in place: home, each line cleared to its end, the rest below cleared.
        /// One write, so the terminal never shows a half-cleared screen.
        pub fn draw(&self, text: &str) {
            let mut buf = String::from("\x1b[H");
            for l in text.lines() {
                buf.push_str(l);
                buf.push_str("\x1b[K\r\n");
            }
            buf.push_str("\x1b[J");
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(buf.as_bytes());
            let _ = o.flush();
        }

        /// Waits until `deadline`, or less: true when the user asked to quit (`q`, or
        /// SIGINT/SIGTERM set `stop`).
        pub fn wait(&self, deadline: Instant, stop: &Arc<AtomicBool>) -> bool {
            wait_until(deadline, stop, self.saved.is_some())
        }
    }

    impl Drop for Screen {
        fn drop(&mut self) {
            if let Some(t) = &self.saved {
                // SAFETY: restoring the attributes read in `enter` on the same fd.
                unsafe { libc::tcsetattr(0, libc::TCSANOW, t) };
            }
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(b"\x1b[?25h");
            let _ = o.flush();
        }
    }

    /// Sleeps until `deadline` in short slices, watching `stop` and, with `keys`, stdin
    /// for `q`. True when asked to quit.
    pub fn wait_until(deadline: Instant, stop: &Arc<AtomicBool>, keys: bool) -> bool {
        loop {
            if stop.load(Ordering::Relaxed) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let slice = (deadline - now).min(Duration::from_millis(100));
            if keys {
                let mut p = libc::pollfd {
                    fd: 0,
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = i32::try_from(slice.as_millis()).unwrap_or(100).max(1);
                // SAFETY: one valid pollfd.
                let n = unsafe { libc::poll(&mut p, 1, ms) };
                if n > 0 && p.revents & libc::POLLIN != 0 {
                    let mut b = [0u8; 64];
                    // SAFETY: reading into a local buffer of the given length.
                    let got = unsafe { libc::read(0, b.as_mut_ptr().cast(), b.len()) };
                    if got > 0 {
                        let got = usize::try_from(got).unwrap_or(0);
                        if b[..got].iter().any(|&c| c == b'q' || c == b'Q' || c == 3) {
                            return true;
                        }
                    } else if got == 0 {
                        // End of input: stop watching it rather than spin.
                        std::thread::sleep(slice);
                    }
                }
            } else {
                std::thread::sleep(slice);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfx_api::nic::{CounterReading, NicStatus};
    use pfx_api::profile::{Snapshot, StageStats};

    fn unit(id: &str) -> TopUnit {
        TopUnit {
            unit: id.into(),
            host: "10.0.0.1".into(),
            http_port: 8080,
            software: Some("2.0.0".into()),
        }
    }

    fn doc() -> ProfileDoc {
        let mut s = Snapshot {
            fps: 59.94,
            fps_target: 60,
            deadline_misses: 3,
            ..Default::default()
        };
        s.stages.insert(
            "wire_send".into(),
            StageStats {
                p99_us: 412.0,
                ..Default::default()
            },
        );
        s.nic = Some(NicStatus {
            pause_rx_frames: CounterReading {
                source: "standard".into(),
                total: Some(1000),
                per_s: Some(130.0),
            },
            ..Default::default()
        });
        ProfileDoc {
            unit: "u1".into(),
            version: "0.1.0".into(),
            health: "ok".into(),
            snapshot: s,
            show: None,
            control: None,
        }
    }

    #[test]
    fn a_unit_that_answered_shows_its_numbers() {
        let r = row(&unit("u1"), &Ok(doc()));
        assert!(r.answered);
        assert_eq!(r.url, "http://10.0.0.1:8080");
        assert_eq!(r.fps, Some(59.94));
        assert_eq!(r.deadline_misses, Some(3));
        assert_eq!(r.wire_send_p99_us, Some(412.0));
        assert_eq!(r.pause_rx_per_s, Some(130.0));
        assert_eq!(r.playing, None);
        assert_eq!(r.sync_offset_ms, None);
        let mut d = doc();
        d.show = Some(pfx_api::show::ShowInfo {
            name: "evening".into(),
            source: pfx_api::show::ShowSource::Store,
            ..Default::default()
        });
        assert_eq!(
            row(&unit("u1"), &Ok(d.clone())).playing.as_deref(),
            Some("evening")
        );
        d.show.as_mut().unwrap().source = pfx_api::show::ShowSource::Config;
        assert_eq!(
            row(&unit("u1"), &Ok(d)).playing.as_deref(),
            Some("evening (config)")
        );
        assert_eq!((r.down, r.reason), (None, None));
    }

    #[test]
    fn a_sync_remote_shows_its_offset_a_master_does_not() {
        let mut d = doc();
        d.snapshot.sync = Some(pfx_api::profile::SyncStatus {
            role: "remote".into(),
            state: "playing".into(),
            offset_ms: Some(-0.25),
            ..Default::default()
        });
        let r = row(&unit("u1"), &Ok(d.clone()));
        assert_eq!(r.sync_offset_ms, Some(-0.25));
        assert!(render(&[r]).contains("-0.25 ms"));
        d.snapshot.sync = Some(pfx_api::profile::SyncStatus {
            role: "master".into(),
            offset_ms: Some(3.0),
            ..Default::default()
        });
        assert_eq!(row(&unit("u1"), &Ok(d)).sync_offset_ms, None);
    }

    #[test]
    fn a_held_override_shows_what_who_and_since_when() {
        use pfx_api::control::{Action, ControlState};
        let mut d = doc();
        d.control = Some(ControlState {
            content: Some(Action::Blackout),
            content_by: Some("alice@10.20.0.5".into()),
            content_since_unix_ms: Some(1_767_225_600_000),
            brightness: Some(0.4),
            brightness_by: Some("bob@10.20.0.6".into()),
            brightness_since_unix_ms: Some(1_767_225_660_000),
        });
        let r = row(&unit("u1"), &Ok(d));
        let want = "blackout by alice@10.20.0.5 since 2026-01-01 00:00:00 UTC; brightness 0.4 by bob@10.20.0.6 since 2026-01-01 00:01:00 UTC";
        assert_eq!(r.live_override.as_deref(), Some(want));
        assert!(render(std::slice::from_ref(&r)).contains(&format!("OVERRIDE {want}")));
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["override"], want);
        let plain = row(&unit("u1"), &Ok(doc()));
        assert_eq!(plain.live_override, None);
        assert!(!render(&[plain]).contains("OVERRIDE"));
        assert_eq!(override_text(&ControlState::default()), None);
    }

    #[test]
    fn a_document_without_nic_or_wire_send_gives_dashes() {
        let mut d = doc();
        d.snapshot.nic = None;
        d.snapshot.stages.clear();
        let r = row(&unit("u1"), &Ok(d));
        assert!(r.answered);
        assert_eq!((r.wire_send_p99_us, r.pause_rx_per_s), (None, None));
        let t = render(&[r]);
        let line = t.lines().nth(1).unwrap_or_default();
        assert!(line.starts_with("u1   up    -"), "{t}");
        assert!(line.contains("59.94"), "{t}");
    }

    #[test]
    fn a_unit_that_is_down_says_so_with_the_reason() {
        let e = Down {
            kind: DownKind::ConnectionRefused,
            detail: "http://10.0.0.1:8080: cannot connect (10.0.0.1:8080: Connection refused (os error 111))".into(),
        };
        let r = row(&unit("u2"), &Err(e));
        assert!(!r.answered);
        assert_eq!(r.fps, None);
        assert_eq!(r.down, Some(DownKind::ConnectionRefused));
        let t = render(&[row(&unit("u1"), &Ok(doc())), r.clone()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].starts_with("unit"), "{t}");
        assert!(lines[1].starts_with("u1   up "), "{t}");
        assert!(
            lines[1].contains("412 µs") && lines[1].contains(" 130 "),
            "{t}"
        );
        assert!(
            lines[2].starts_with("u2   DOWN  connection refused: http://10.0.0.1:8080"),
            "{t}"
        );
        let j = serde_json::to_value(&r).unwrap();
        assert_eq!(j["answered"], false);
        assert_eq!(j["down"], "connection_refused");
        assert!(j["fps"].is_null());
    }

    #[test]
    fn another_unit_answering_is_shown() {
        let mut d = doc();
        d.unit = "u9".into();
        let t = render(&[row(&unit("u1"), &Ok(d))]);
        assert!(t.contains("2.0.0      ok (answers as u9)"), "{t}");
    }

    #[test]
    fn client_errors_sort_into_kinds() {
        let k = |e: HttpError| classify(&e).kind;
        let url = "http://x:1".to_string();
        assert_eq!(
            k(HttpError::Connect {
                url: url.clone(),
                reason: "1.2.3.4:1: Connection refused (os error 111)".into()
            }),
            DownKind::ConnectionRefused
        );
        assert_eq!(
            k(HttpError::Connect {
                url: url.clone(),
                reason: "1.2.3.4:1: connection timed out".into()
            }),
            DownKind::TimedOut
        );
        assert_eq!(
            k(HttpError::Io {
                url: url.clone(),
                reason: "no complete answer within 1 s".into()
            }),
            DownKind::TimedOut
        );
        assert_eq!(
            k(HttpError::Status {
                url: url.clone(),
                status: 404,
                body: String::new()
            }),
            DownKind::HttpStatus
        );
        assert_eq!(
            k(HttpError::Malformed {
                url,
                reason: "x".into()
            }),
            DownKind::NotProfile
        );
        assert_eq!(
            parse_profile("http://x:1", b"{\"hello\": 1}")
                .unwrap_err()
                .kind,
            DownKind::NotProfile
        );
    }

    #[test]
    fn the_txt_port_wins_over_the_default() {
        assert_eq!(
            http_port_from_txt(Some(r#"{"http_port": 8090}"#), 8080),
            8090
        );
        assert_eq!(
            http_port_from_txt(Some(r#"{"http_port": null}"#), 8080),
            8080
        );
        assert_eq!(http_port_from_txt(Some("garbage"), 8080), 8080);
        assert_eq!(http_port_from_txt(None, 8081), 8081);
    }

    /// A fake fetch (mock): one unit blocks for a long time; the pool still returns the
    /// others' rows in order, and does not wait for it longer than its own fetch.
    #[test]
    fn pool_keeps_order_and_a_slow_unit_does_not_delay_others_mock() {
        let units: Vec<TopUnit> = (1..=6).map(|i| unit(&format!("u{i}"))).collect();
        let t0 = std::time::Instant::now();
        let rows = poll_with(&units, 3, |u| {
            if u.unit == "u2" {
                std::thread::sleep(Duration::from_millis(300));
                Err(Down {
                    kind: DownKind::TimedOut,
                    detail: "slow".into(),
                })
            } else {
                std::thread::sleep(Duration::from_millis(50));
                Ok(doc())
            }
        });
        let took = t0.elapsed();
        let ids: Vec<&str> = rows.iter().map(|r| r.unit.as_str()).collect();
        assert_eq!(ids, ["u1", "u2", "u3", "u4", "u5", "u6"]);
        assert!(!rows[1].answered && rows.iter().filter(|r| r.answered).count() == 5);
        // Serially this is 550 ms; with 3 workers the slow one runs beside the rest.
        assert!(took < Duration::from_millis(450), "{took:?}");
    }

    /// Real sockets: a refused port and a listener that never answers.
    #[test]
    fn real_refused_and_silent_units() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let refused_port = free.local_addr().unwrap().port();
        drop(free);
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_port = silent.local_addr().unwrap().port();
        let mk = |id: &str, port| TopUnit {
            unit: id.into(),
            host: "127.0.0.1".into(),
            http_port: port,
            software: None,
        };
        let units = [mk("refused", refused_port), mk("silent", silent_port)];
        let rows = poll(&units, 4, Duration::from_millis(300));
        assert_eq!(rows[0].down, Some(DownKind::ConnectionRefused), "{rows:?}");
        assert_eq!(rows[1].down, Some(DownKind::TimedOut), "{rows:?}");
        drop(silent);
    }
}
