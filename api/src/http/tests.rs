use super::*;
use std::net::TcpListener;

#[test]
fn urls() {
    let u = |host: &str, port, path: &str| {
        Ok(HttpUrl {
            host: host.into(),
            port,
            path: path.into(),
        })
    };
    assert_eq!(
        parse_url("http://unit.local:8080"),
        u("unit.local", 8080, "")
    );
    assert_eq!(
        parse_url("http://10.0.0.1/pfx/"),
        u("10.0.0.1", 80, "/pfx/")
    );
    assert_eq!(
        parse_url("http://10.0.0.5:8081/api/v1/status"),
        u("10.0.0.5", 8081, "/api/v1/status")
    );
    assert_eq!(parse_url("http://[::1]:9/"), u("::1", 9, "/"));
    assert_eq!(parse_url("http://[fe80::1]"), u("fe80::1", 80, ""));
    assert_eq!(
        parse_url("http://[::1]:9/").map(|u| u.host_header()),
        Ok("[::1]:9".to_string())
    );
    assert!(matches!(
        parse_url("https://x"),
        Err(HttpError::Scheme { .. })
    ));
    assert!(matches!(
        parse_url("http://x:eighty"),
        Err(HttpError::Port { .. })
    ));
    assert!(matches!(
        parse_url("http://[::1]x"),
        Err(HttpError::Port { .. })
    ));
    assert!(matches!(
        parse_url("http://[::1"),
        Err(HttpError::Port { .. })
    ));
    assert!(matches!(
        parse_url("http://:80/"),
        Err(HttpError::Resolve { .. })
    ));
}

fn ok(status: u16, body: &[u8]) -> Result<Response, String> {
    Ok(Response {
        status,
        body: body.to_vec(),
    })
}

#[test]
fn responses() {
    let r = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokEXTRA";
    assert_eq!(parse_response(r), ok(200, b"ok"));
    let r = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}extra";
    assert_eq!(parse_response(r), ok(200, b"{}"));
    let r = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n";
    assert_eq!(parse_response(r), ok(503, b"abcde"));
    // No length, no chunking: the body runs to the end of the stream.
    assert_eq!(
        parse_response(b"HTTP/1.1 200 OK\r\n\r\nall of it"),
        ok(200, b"all of it")
    );
    assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nshort").is_err());
    assert!(parse_response(b"HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n").is_err());
    assert!(parse_response(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
    assert!(parse_response(b"nonsense").is_err());
}

#[test]
fn chunked_in_any_case_and_as_the_last_coding_only() {
    for te in [
        "chunked",
        "CHUNKED",
        "Chunked",
        "gzip, chunked",
        " chunked ",
    ] {
        for name in [
            "Transfer-Encoding",
            "transfer-encoding",
            "TRANSFER-ENCODING",
        ] {
            let r = format!("HTTP/1.1 200 OK\r\n{name}:{te}\r\n\r\n2\r\nab\r\n0\r\n\r\n");
            assert_eq!(parse_response(r.as_bytes()), ok(200, b"ab"), "{name}: {te}");
        }
    }
    // "chunked" not last: not chunk-framed, the body is read as it is.
    let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n2\r\nab\r\n0\r\n\r\n";
    assert_eq!(parse_response(r), ok(200, b"2\r\nab\r\n0\r\n\r\n"));
    // Chunked wins over a Content-Length.
    let r = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n";
    assert_eq!(parse_response(r), ok(200, b"ab"));
}

#[test]
fn broken_chunks_are_errors_not_panics() {
    for body in [
        &b"ffffffffffffffff\r\nab"[..],
        b"10000000000000000\r\n",
        b"2\r\nab",
        b"2\r\nabXY0\r\n\r\n",
        b"2",
        b"zz\r\nab\r\n",
        b"",
    ] {
        let mut r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        r.extend_from_slice(body);
        assert!(
            parse_response(&r).is_err(),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn status_other_than_200_carries_the_body() {
    let r = Response {
        status: 503,
        body: b"  render loop stalled\n".to_vec(),
    };
    assert_eq!(
        r.ok_body("http://u").unwrap_err().to_string(),
        "http://u: HTTP 503: render loop stalled"
    );
}

/// A one-shot server on `l`: answers `reply` and returns what it received.
fn serve_once(l: TcpListener, reply: &'static [u8]) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        // Read the head and, if one was announced, the body.
        loop {
            let n = c.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).into_owned();
            if let Some(end) = text.find("\r\n\r\n") {
                let len = text
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        c.write_all(reply).unwrap();
        String::from_utf8_lossy(&buf).into_owned()
    })
}

#[test]
fn request_against_a_loopback_server_sends_headers_and_body() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = serve_once(
        l,
        b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
    );
    let r = request(
        "PUT",
        &format!("http://127.0.0.1:{port}/x"),
        &[("Authorization", "Bearer s3cret")],
        Some(b"{\"enabled\":true}"),
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(r, ok(200, b"{\"ok\":true}").unwrap());
    let req = t.join().unwrap();
    assert!(req.starts_with("PUT /x HTTP/1.1\r\n"), "{req}");
    assert!(
        req.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
        "{req}"
    );
    assert!(req.contains("Authorization: Bearer s3cret\r\n"));
    assert!(req.contains("Content-Length: 16\r\n"));
    assert!(req.ends_with("{\"enabled\":true}"));
}

#[test]
fn path_under_a_base_url_and_chunked_answer() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = serve_once(
        l,
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n",
    );
    let base = format!("http://127.0.0.1:{port}/pfx/");
    let r = request_path("GET", &base, "/profile", &[], None, Duration::from_secs(5)).unwrap();
    assert_eq!(r.body, b"{\"a\":1}");
    assert!(
        t.join()
            .unwrap()
            .starts_with("GET /pfx/profile HTTP/1.1\r\n")
    );
}

#[test]
fn ipv6_literal_with_port() {
    let Ok(l) = TcpListener::bind("[::1]:0") else {
        eprintln!("skipped: no IPv6 loopback here");
        return;
    };
    let port = l.local_addr().unwrap().port();
    let t = serve_once(l, b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
    let r = request(
        "GET",
        &format!("http://[::1]:{port}/health"),
        &[],
        None,
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(r.status, 204);
    let req = t.join().unwrap();
    assert!(req.contains(&format!("Host: [::1]:{port}\r\n")), "{req}");
}

#[test]
fn unreachable_names_the_url_and_never_the_headers() {
    // A port nobody listens on: bind, learn the port, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let e = request(
        "GET",
        &url,
        &[("Authorization", "Bearer s3cret")],
        None,
        Duration::from_secs(2),
    )
    .unwrap_err();
    assert!(matches!(e, HttpError::Connect { .. }), "{e}");
    assert!(
        e.to_string().starts_with(&format!("{url}: cannot connect")),
        "{e}"
    );
    assert!(!e.to_string().contains("s3cret"));
}

#[test]
fn a_silent_server_times_out_with_a_clear_reason() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let hold = std::thread::spawn(move || {
        let c = l.accept().unwrap();
        std::thread::sleep(Duration::from_millis(800));
        drop(c);
    });
    let e = request(
        "GET",
        &format!("http://127.0.0.1:{port}/"),
        &[],
        None,
        Timeouts {
            connect: Duration::from_secs(2),
            io: Duration::from_millis(200),
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().ends_with("no complete answer within 0.2 s"),
        "{e}"
    );
    hold.join().unwrap();
}
