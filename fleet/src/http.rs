//! A small HTTP/1.1 client for the two plain-HTTP peers the fleet tool talks to: the
//! pole management API and the player's `/profile`. One request per connection, hard
//! timeouts, JSON bodies. Headers passed in (the pole token) are never logged or put
//! into errors.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{url}: only http://HOST[:PORT][/PATH] URLs are supported")]
    Url { url: String },
    #[error("{url}: {op}: {detail}")]
    Io {
        url: String,
        op: &'static str,
        detail: String,
    },
    #[error("{url}: malformed HTTP response: {detail}")]
    Response { url: String, detail: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Splits `http://host:port/path` into (host, port, path).
pub fn split_url(url: &str) -> Option<(String, u16, String)> {
    let rest = url.strip_prefix("http://")?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => (h, p.parse().ok()?),
        None => (hostport, 80),
    };
    if host.is_empty() {
        return None;
    }
    Some((host.to_string(), port, path.to_string()))
}

/// Parses a complete HTTP/1.x response (status line, headers, body by Content-Length,
/// chunked, or to the end of the stream).
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of headers")?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| "headers are not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty response")?;
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut len = None;
    let mut chunked = false;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                len = Some(v.parse::<usize>().map_err(|_| "bad Content-Length")?);
            } else if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            }
        }
    }
    let body = &raw[head_end + 4..];
    let body = if chunked {
        let mut out = Vec::new();
        let mut rest = body;
        loop {
            let e = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or("truncated chunk size")?;
            let size_s = std::str::from_utf8(&rest[..e]).map_err(|_| "bad chunk size")?;
            let size = usize::from_str_radix(size_s.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| "bad chunk size")?;
            rest = &rest[e + 2..];
            if size == 0 {
                break;
            }
            if rest.len() < size {
                return Err("truncated chunk".into());
            }
            out.extend_from_slice(&rest[..size]);
            rest = rest.get(size + 2..).unwrap_or(&[]);
        }
        out
    } else if let Some(n) = len {
        if body.len() < n {
            return Err(format!(
                "body is {} bytes, Content-Length says {n}",
                body.len()
            ));
        }
        body[..n].to_vec()
    } else {
        body.to_vec()
    };
    Ok(Response { status, body })
}

/// One request. `headers` are extra `(name, value)` pairs; their values never appear
/// in errors.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
    timeout: Duration,
) -> Result<Response, HttpError> {
    let (host, port, path) = split_url(url).ok_or_else(|| HttpError::Url { url: url.into() })?;
    let io = |op: &'static str| {
        let url = url.to_string();
        move |e: std::io::Error| HttpError::Io {
            url,
            op,
            detail: e.to_string(),
        }
    };
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(io("resolve"))?
        .next()
        .ok_or_else(|| HttpError::Io {
            url: url.into(),
            op: "resolve",
            detail: "no address".into(),
        })?;
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(io("connect"))?;
    s.set_read_timeout(Some(timeout))
        .map_err(io("set timeout"))?;
    s.set_write_timeout(Some(timeout))
        .map_err(io("set timeout"))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\nAccept: application/json\r\n"
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
    s.write_all(&bytes).map_err(io("send"))?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(io("read"))?;
    parse_response(&raw).map_err(|detail| HttpError::Response {
        url: url.into(),
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            split_url("http://10.0.0.5:8081/api/v1/status"),
            Some(("10.0.0.5".into(), 8081, "/api/v1/status".into()))
        );
        assert_eq!(
            split_url("http://pole"),
            Some(("pole".into(), 80, "/".into()))
        );
        assert_eq!(split_url("https://pole"), None);
        assert_eq!(split_url("http://:80/"), None);
    }

    #[test]
    fn responses() {
        let r = parse_response(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}extra").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        let r = parse_response(
            b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (401, &b"abcde"[..]));
        assert!(parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").is_err());
        assert!(parse_response(b"nonsense").is_err());
    }

    #[test]
    fn request_against_a_loopback_server_sends_headers_and_body() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = vec![0u8; 4096];
            let n = c.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).into_owned();
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
                .unwrap();
            req
        });
        let r = request(
            "PUT",
            &format!("http://127.0.0.1:{port}/x"),
            &[("Authorization", "Bearer s3cret")],
            Some(b"{\"enabled\":true}"),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(r.status, 200);
        let req = t.join().unwrap();
        assert!(req.starts_with("PUT /x HTTP/1.1\r\n"));
        assert!(req.contains("Authorization: Bearer s3cret\r\n"));
        assert!(req.ends_with("{\"enabled\":true}"));
    }
}
