//! The one HTTP/1.1 client of pfx: `pfx-player profile` reads a unit's `/profile`, the
//! agent reads its player's, and the fleet talks to the poles' management API. One request
//! per connection (`Connection: close`), hard timeouts, a size cap, no client library.
//! Header values passed in (the pole token) never appear in errors.
//!
//! `parse_response` takes bytes from the network and is fuzzed (`fuzz/fuzz_targets/http_response.rs`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// A response larger than this is refused (a `/profile` is a few kB).
pub const MAX_RESPONSE: usize = 4 << 20;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum HttpError {
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
    #[error("{url}: cannot connect ({reason})")]
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

/// An `http://host[:port][/path]` URL split into its parts. IPv6 hosts are written
/// `[::1]:8080` and kept here without the brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub host: String,
    pub port: u16,
    /// Everything from the first `/` after the authority, as written ("" for none).
    pub path: String,
}

impl HttpUrl {
    /// The `Host:` header value: brackets back around an IPv6 address.
    pub fn host_header(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

pub fn parse_url(url: &str) -> Result<HttpUrl, HttpError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| HttpError::Scheme { url: url.into() })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((h, "")) => (h, None),
            Some((h, p)) => match p.strip_prefix(':') {
                Some(p) => (h, Some(p)),
                None => {
                    return Err(HttpError::Port {
                        url: url.into(),
                        port: p.into(),
                    });
                }
            },
            None => {
                return Err(HttpError::Port {
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
        Some(p) => p.parse().map_err(|_| HttpError::Port {
            url: url.into(),
            port: p.into(),
        })?,
    };
    if host.is_empty() {
        return Err(HttpError::Resolve {
            url: url.into(),
            host: String::new(),
            reason: "no host".into(),
        });
    }
    Ok(HttpUrl {
        host: host.into(),
        port,
        path: path.into(),
    })
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    /// The body on a 200; otherwise `HttpError::Status` with the start of the body.
    pub fn ok_body(self, url: &str) -> Result<Vec<u8>, HttpError> {
        if self.status == 200 {
            return Ok(self.body);
        }
        let body = String::from_utf8_lossy(&self.body)
            .trim()
            .chars()
            .take(300)
            .collect();
        Err(HttpError::Status {
            url: url.into(),
            status: self.status,
            body,
        })
    }
}

/// Whether a `Transfer-Encoding` value ends in `chunked` (the last coding decides how
/// the body is framed), in any letter case.
fn is_chunked(value: &str) -> bool {
    value
        .rsplit(',')
        .next()
        .is_some_and(|c| c.trim().eq_ignore_ascii_case("chunked"))
}

/// Parses a complete HTTP/1.x response: status line, headers, and the body framed by
/// `Transfer-Encoding: chunked`, `Content-Length`, or the end of the stream. The reason
/// on an error says what was wrong, never more than a short excerpt of the bytes.
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let excerpt: String = status_line.chars().take(80).collect();
    let mut parts = status_line.split(' ');
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(format!("not an HTTP/1 status line: {excerpt:?}"));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {excerpt:?}"))?;
    let mut chunked = false;
    let mut length: Option<usize> = None;
    for l in lines {
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("transfer-encoding") {
            chunked = is_chunked(v);
        } else if k.eq_ignore_ascii_case("content-length") {
            let n = v.parse().map_err(|_| {
                format!(
                    "bad Content-Length {:?}",
                    v.chars().take(40).collect::<String>()
                )
            })?;
            length = Some(n);
        }
    }
    let body = &raw[end + 4..];
    // Chunked wins over a Content-Length (RFC 9112 6.3).
    let body = if chunked {
        dechunk(body)?
    } else {
        match length {
            Some(n) if body.len() < n => {
                return Err(format!("body cut short: {} of {n} bytes", body.len()));
            }
            Some(n) => body[..n].to_vec(),
            None => body.to_vec(),
        }
    };
    Ok(Response { status, body })
}

fn dechunk(mut b: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = b
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("chunk size line cut short")?;
        let line = std::str::from_utf8(&b[..eol]).map_err(|_| "chunk size is not text")?;
        let size_s = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_s, 16).map_err(|_| {
            format!(
                "bad chunk size {:?}",
                size_s.chars().take(20).collect::<String>()
            )
        })?;
        b = &b[eol + 2..];
        if size == 0 {
            // Trailers, if any, are not needed.
            return Ok(out);
        }
        let with_crlf = size.checked_add(2).ok_or("chunk size too large")?;
        if b.len() < with_crlf {
            return Err("chunk cut short".into());
        }
        if &b[size..with_crlf] != b"\r\n" {
            return Err("chunk not followed by CRLF".into());
        }
        out.extend_from_slice(&b[..size]);
        b = &b[with_crlf..];
    }
}

/// How long to wait for the connection, and then for each read or write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub io: Duration,
}

impl From<Duration> for Timeouts {
    fn from(d: Duration) -> Self {
        Timeouts { connect: d, io: d }
    }
}

/// One request to `url`. `headers` are extra `(name, value)` pairs whose values never
/// appear in errors; a `body` goes as `application/json`.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeouts: impl Into<Timeouts>,
) -> Result<Response, HttpError> {
    request_path(method, url, "", headers, body, timeouts)
}

/// Like `request`, to `path` under the base URL `base` (`http://unit:8080` + `/profile`).
/// Errors name `base`, the address the user gave.
pub fn request_path(
    method: &str,
    base: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeouts: impl Into<Timeouts>,
) -> Result<Response, HttpError> {
    let t = timeouts.into();
    let u = parse_url(base)?;
    let target = match (u.path.as_str(), path) {
        ("", "") => "/".to_string(),
        (p, "") => p.to_string(),
        (p, q) => format!("{}{q}", p.trim_end_matches('/')),
    };
    let url = base;
    let io = |e: std::io::Error| HttpError::Io {
        url: url.into(),
        reason: e.to_string(),
    };
    let addrs: Vec<_> = (u.host.as_str(), u.port)
        .to_socket_addrs()
        .map_err(|e| HttpError::Resolve {
            url: url.into(),
            host: u.host.clone(),
            reason: e.to_string(),
        })?
        .collect();
    let mut last = String::from("no address");
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, t.connect) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    let mut s = stream.ok_or_else(|| HttpError::Connect {
        url: url.into(),
        reason: last,
    })?;
    s.set_read_timeout(Some(t.io)).map_err(io)?;
    s.set_write_timeout(Some(t.io)).map_err(io)?;
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: pfx/{}\r\nAccept: application/json\r\nConnection: close\r\n",
        u.host_header(),
        env!("CARGO_PKG_VERSION")
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = body {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        ));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    if let Some(b) = body {
        bytes.extend_from_slice(b);
    }
    s.write_all(&bytes).map_err(io)?;
    let mut raw = Vec::new();
    Read::by_ref(&mut s)
        .take(MAX_RESPONSE as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => HttpError::Io {
                url: url.into(),
                reason: format!("no complete answer within {} s", t.io.as_secs_f64()),
            },
            _ => io(e),
        })?;
    if raw.len() > MAX_RESPONSE {
        return Err(HttpError::Malformed {
            url: url.into(),
            reason: format!("response over {MAX_RESPONSE} bytes"),
        });
    }
    parse_response(&raw).map_err(|reason| HttpError::Malformed {
        url: url.into(),
        reason,
    })
}

#[cfg(test)]
mod tests;
