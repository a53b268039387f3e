//! `pfx-player profile`: fetch a unit's `/profile` and print the per-stage table and the
//! NIC/PAUSE lines. A minimal HTTP/1.1 GET over a std `TcpStream` with connect and read
//! timeouts: one request per refresh, no client library.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;

use crate::profiler::window::SERIES;

pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// A /profile larger than this is not one.
pub const MAX_RESPONSE: usize = 4 << 20;

#[derive(Debug, Clone, clap::Args)]
pub struct ProfileArgs {
    /// The unit's HTTP address.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// Refresh every second until interrupted.
    #[arg(long)]
    pub watch: bool,
    /// Print the unit's JSON as it came.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FetchError {
    #[error("{url}: only http:// URLs are supported (give e.g. http://unit.local:8080)")]
    Scheme { url: String },
    #[error("{url}: bad port {port:?}")]
    Port { url: String, port: String },
    #[error("{url}: cannot resolve {host}: {reason}")]
    Resolve {
        url: String,
        host: String,
        reason: String,
    },
    #[error("{url}: cannot connect ({reason}); is pfx-player running there with HTTP enabled?")]
    Connect { url: String, reason: String },
    #[error("{url}: {reason}")]
    Io { url: String, reason: String },
    #[error("{url}: malformed HTTP response: {reason}")]
    Malformed { url: String, reason: String },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
}

/// An `http://host[:port][/base]` URL split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash ("" for none).
    pub base: String,
}

pub fn parse_url(url: &str) -> Result<HttpUrl, FetchError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| FetchError::Scheme { url: url.into() })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, p)) => (h, p.strip_prefix(':')),
            None => {
                return Err(FetchError::Port {
                    url: url.into(),
                    port: authority.into(),
                });
            }
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => 80,
        Some(p) => p.parse().map_err(|_| FetchError::Port {
            url: url.into(),
            port: p.into(),
        })?,
    };
    if host.is_empty() {
        return Err(FetchError::Resolve {
            url: url.into(),
            host: String::new(),
            reason: "no host".into(),
        });
    }
    Ok(HttpUrl {
        host: host.into(),
        port,
        base: path.trim_end_matches('/').into(),
    })
}

/// Status and body of an HTTP/1.x response (Content-Length, chunked, or up to EOF).
pub fn parse_response(raw: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.split(' ');
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(format!("not an HTTP/1 status line: {status_line:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or(format!("bad status line {status_line:?}"))?;
    let mut chunked = false;
    let mut length: Option<usize> = None;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
            chunked = true;
        } else if k == "content-length" {
            length = Some(v.parse().map_err(|_| format!("bad Content-Length {v:?}"))?);
        }
    }
    let body = &raw[end + 4..];
    if chunked {
        return dechunk(body).map(|b| (status, b));
    }
    match length {
        Some(n) if body.len() < n => Err(format!("body cut short: {} of {n} bytes", body.len())),
        Some(n) => Ok((status, body[..n].to_vec())),
        None => Ok((status, body.to_vec())),
    }
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line cut short")?;
        let size_s = std::str::from_utf8(&b[..eol]).map_err(|_| "chunk size is not text")?;
        let size_s = size_s.split(';').next().unwrap_or("").trim();
        let size =
            usize::from_str_radix(size_s, 16).map_err(|_| format!("bad chunk size {size_s:?}"))?;
        b = &b[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if b.len() < size + 2 {
            return Err("chunk cut short".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

/// GET `path` (e.g. "/profile") from `url`; the body on a 200.
pub fn get(url: &str, path: &str) -> Result<Vec<u8>, FetchError> {
    let u = parse_url(url)?;
    let io = |e: std::io::Error| FetchError::Io {
        url: url.into(),
        reason: e.to_string(),
    };
    let addrs: Vec<_> = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .map_err(|e| FetchError::Resolve {
            url: url.into(),
            host: u.host.clone(),
            reason: e.to_string(),
        })?
        .collect();
    let mut last = String::from("no address");
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, CONNECT_TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    let mut s = stream.ok_or_else(|| FetchError::Connect {
        url: url.into(),
        reason: last,
    })?;
    s.set_read_timeout(Some(READ_TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(READ_TIMEOUT)).map_err(io)?;
    let host = if u.host.contains(':') {
        format!("[{}]", u.host)
    } else {
        u.host.clone()
    };
    let req = format!(
        "GET {}{} HTTP/1.1\r\nHost: {}:{}\r\nUser-Agent: pfx-player-profile\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        u.base, path, host, u.port
    );
    s.write_all(req.as_bytes()).map_err(io)?;
    let mut raw = Vec::new();
    Read::by_ref(&mut s)
        .take(MAX_RESPONSE as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => FetchError::Io {
                url: url.into(),
                reason: format!("no complete answer within {} s", READ_TIMEOUT.as_secs()),
            },
            _ => io(e),
        })?;
    if raw.len() > MAX_RESPONSE {
        return Err(FetchError::Malformed {
            url: url.into(),
            reason: format!("response over {MAX_RESPONSE} bytes"),
        });
    }
    let (status, body) = parse_response(&raw).map_err(|reason| FetchError::Malformed {
        url: url.into(),
        reason,
    })?;
    if status != 200 {
        let body = String::from_utf8_lossy(&body)
            .trim()
            .chars()
            .take(300)
            .collect();
        return Err(FetchError::Status {
            url: url.into(),
            status,
            body,
        });
    }
    Ok(body)
}

fn f(v: &serde_json::Value, d: usize) -> String {
    v.as_f64()
        .map(|x| format!("{x:.d$}"))
        .unwrap_or_else(|| "-".into())
}

fn counter_line(name: &str, r: &serde_json::Value) -> String {
    let source = r["source"].as_str().unwrap_or("?");
    match (r["total"].as_u64(), r["per_s"].as_f64()) {
        (None, _) => format!("{name}: unsupported by the driver"),
        (Some(t), Some(p)) => format!("{name}: {t} total, {p:.1}/s ({source})"),
        (Some(t), None) => format!("{name}: {t} total, rate pending ({source})"),
    }
}

/// NIC/PAUSE lines for the `nic` object of /profile (see `nic::NicStatus`).
pub fn nic_lines(n: &serde_json::Value) -> Vec<String> {
    let mut v = Vec::new();
    let host = n["host"]
        .as_str()
        .filter(|h| !h.is_empty())
        .map(|h| format!(" on {h}"))
        .unwrap_or_default();
    let pause = if n["pause"].is_object() {
        let on = |k: &str| {
            if n["pause"][k].as_bool().unwrap_or(false) {
                "on"
            } else {
                "off"
            }
        };
        format!("autoneg {} rx {} tx {}", on("autoneg"), on("rx"), on("tx"))
    } else {
        match n["pause_error"].as_str() {
            Some(e) => format!("settings unknown ({e})"),
            None => "settings unknown".into(),
        }
    };
    v.push(format!(
        "NIC {}{host}: PAUSE {pause}",
        n["interface"].as_str().unwrap_or("?")
    ));
    v.push(format!(
        "  {}",
        counter_line("PAUSE rx frames", &n["pause_rx_frames"])
    ));
    v.push(format!(
        "  {}",
        counter_line("PAUSE tx frames", &n["pause_tx_frames"])
    ));
    v.push(format!(
        "  {}",
        counter_line("tx_timeouts", &n["tx_timeouts"])
    ));
    let opt = |k: &str| {
        n[k].as_u64()
            .map(|x| x.to_string())
            .unwrap_or_else(|| "-".into())
    };
    v.push(format!(
        "  link {} {}, carrier {} (changes {}), tx_dropped {}, tx_errors {}, queue {} drops {}",
        n["speed_mbps"]
            .as_u64()
            .map(|s| format!("{s} Mb/s"))
            .unwrap_or_else(|| "speed ?".into()),
        n["duplex"].as_str().unwrap_or("duplex ?"),
        match n["carrier"].as_bool() {
            Some(true) => "up",
            Some(false) => "DOWN",
            None => "?",
        },
        opt("carrier_changes"),
        opt("tx_dropped"),
        opt("tx_errors"),
        n["qdisc"].as_str().unwrap_or("?"),
        opt("qdisc_drops"),
    ));
    v
}

/// The human-readable report for one /profile document.
pub fn render(v: &serde_json::Value) -> String {
    let mut out = String::new();
    let s = |k: &str| v[k].as_str().unwrap_or("?").to_string();
    out += &format!(
        "unit {}  version {}  health: {}\n",
        s("unit"),
        s("version"),
        s("health")
    );
    out += &format!(
        "window {} s: {} frames, {} fps (target {}), {} deadline misses, {} skipped ticks\n",
        f(&v["window_s"], 0),
        v["frames"],
        f(&v["fps"], 1),
        v["fps_target"],
        v["deadline_misses"],
        v["skipped_ticks"],
    );
    let ss = &v["since_start"];
    out += &format!(
        "since start: {} frames, {} fps, {} deadline misses, {} skipped ticks, {} samples lost\n\n",
        ss["frames"],
        f(&ss["fps"], 1),
        ss["deadline_misses"],
        ss["skipped_ticks"],
        v["samples_lost"],
    );
    out += &format!(
        "{:<12} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
        "stage", "p50 µs", "p95 µs", "p99 µs", "max µs", "count"
    );
    for name in SERIES {
        let st = &v["stages"][name];
        if st.is_null() {
            continue;
        }
        out += &format!(
            "{:<12} {:>10} {:>10} {:>10} {:>10} {:>8}\n",
            name,
            f(&st["p50_us"], 1),
            f(&st["p95_us"], 1),
            f(&st["p99_us"], 1),
            f(&st["max_us"], 1),
            st["count"].to_string()
        );
    }
    out += "\n";
    if v["nic"].is_object() {
        for l in nic_lines(&v["nic"]) {
            out += &l;
            out += "\n";
        }
    } else {
        out += "NIC: no reading (PAUSE counters unknown)\n";
    }
    if let Some(outs) = v["outputs"].as_array() {
        for o in outs {
            let rate = |k: &str| f(&o["rates"][k], 1);
            let errs = o["errors"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, c)| format!("{k}={c}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            out += &format!(
                "output {} ({} → {}): {} frames sent, {} dropped ({}/s), {} failed{}\n",
                o["name"].as_str().unwrap_or("?"),
                o["protocol"].as_str().unwrap_or("?"),
                o["destination"].as_str().unwrap_or("?"),
                o["frames_sent"],
                o["frames_dropped"],
                rate("frames_dropped_per_s"),
                o["frames_failed"],
                if errs.is_empty() {
                    String::new()
                } else {
                    format!(", errors {errs}")
                },
            );
        }
    }
    out
}

pub fn run(args: ProfileArgs) -> anyhow::Result<ExitCode> {
    loop {
        let result = get(&args.url, "/profile");
        let text = match result {
            Ok(body) if args.json => String::from_utf8_lossy(&body).into_owned(),
            Ok(body) => {
                let v: serde_json::Value = serde_json::from_slice(&body).with_context(|| {
                    format!(
                        "{}/profile did not answer JSON",
                        args.url.trim_end_matches('/')
                    )
                })?;
                render(&v)
            }
            Err(e) if args.watch => format!("{e}\n"),
            Err(e) => return Err(e).context("pfx-player profile"),
        };
        if !args.watch {
            print!("{text}");
            if args.json && !text.ends_with('\n') {
                println!();
            }
            return Ok(ExitCode::SUCCESS);
        }
        // clear the screen and redraw
        print!("\x1b[2J\x1b[H{text}");
        if args.json && !text.ends_with('\n') {
            println!();
        }
        let _ = std::io::stdout().flush();
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://unit.local:8080"),
            Ok(HttpUrl {
                host: "unit.local".into(),
                port: 8080,
                base: String::new()
            })
        );
        assert_eq!(
            parse_url("http://10.0.0.1/pfx/"),
            Ok(HttpUrl {
                host: "10.0.0.1".into(),
                port: 80,
                base: "/pfx".into()
            })
        );
        assert_eq!(
            parse_url("http://[::1]:9/"),
            Ok(HttpUrl {
                host: "::1".into(),
                port: 9,
                base: String::new()
            })
        );
        assert!(matches!(
            parse_url("https://x"),
            Err(FetchError::Scheme { .. })
        ));
        assert!(matches!(
            parse_url("http://x:eighty"),
            Err(FetchError::Port { .. })
        ));
    }

    #[test]
    fn responses() {
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA";
        assert_eq!(parse_response(r), Ok((200, b"ok".to_vec())));
        let r = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(r), Ok((503, b"abcde".to_vec())));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort").is_err());
        assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
    }

    #[test]
    fn unreachable_unit_names_the_url() {
        // a port nobody listens on: bind, learn the port, close
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}");
        let e = get(&url, "/profile").unwrap_err();
        assert!(matches!(e, FetchError::Connect { .. }), "{e}");
        assert!(e.to_string().contains(&url), "{e}");
        let r = run(ProfileArgs {
            url: url.clone(),
            watch: false,
            json: false,
        });
        assert!(format!("{:#}", r.unwrap_err()).contains(&url));
    }

    #[test]
    fn renders_table_and_pause_lines() {
        let v = serde_json::json!({
            "unit": "u1", "version": "0.1.0", "health": "ok", "window_s": 5.0, "frames": 300, "fps": 60.0,
            "fps_target": 60, "deadline_misses": 0, "skipped_ticks": 0, "samples_lost": 0,
            "since_start": {"frames": 900, "fps": 60.0, "deadline_misses": 1, "skipped_ticks": 2},
            "stages": {"wire_send": {"p50_us": 151.0, "p95_us": 113727.0, "p99_us": 136984.0, "max_us": 140000.0, "count": 300}},
            "outputs": [{"name": "pole-1", "protocol": "sacn", "destination": "239.255.0.1:5568", "frames_sent": 290,
                          "frames_dropped": 10, "frames_failed": 0, "errors": {"EAGAIN": 10}, "rates": {"frames_dropped_per_s": 2.0}}],
            "nic": {"interface": "eth0", "host": "pi", "read_at_unix_ms": 0, "pause": {"autoneg": true, "rx": true, "tx": false},
                    "pause_error": null,
                    "pause_rx_frames": {"source": "standard", "total": 2400000, "per_s": 130.0},
                    "pause_tx_frames": {"source": "unsupported", "total": null, "per_s": null},
                    "tx_timeouts": {"source": "sysfs", "total": 0, "per_s": 0.0},
                    "speed_mbps": 1000, "duplex": "full", "carrier": true, "carrier_changes": 1,
                    "rx_packets": null, "tx_packets": null, "rx_bytes": null, "tx_bytes": null, "tx_dropped": 0,
                    "tx_errors": 0, "qdisc": "pfifo_head_drop", "qdisc_drops": 7, "qdisc_backlog_bytes": 0}
        });
        let t = render(&v);
        assert!(t.contains("queue pfifo_head_drop drops 7"), "{t}");
        assert!(
            t.contains("wire_send         151.0   113727.0   136984.0   140000.0      300"),
            "{t}"
        );
        assert!(
            t.contains("NIC eth0 on pi: PAUSE autoneg on rx on tx off"),
            "{t}"
        );
        assert!(
            t.contains("PAUSE rx frames: 2400000 total, 130.0/s (standard)"),
            "{t}"
        );
        assert!(
            t.contains("PAUSE tx frames: unsupported by the driver"),
            "{t}"
        );
        assert!(t.contains("output pole-1 (sacn → 239.255.0.1:5568): 290 frames sent, 10 dropped (2.0/s), 0 failed, errors EAGAIN=10"), "{t}");
    }
}
