//! The FPP Connect router with hostile requests, in process (a real `PfxStore` on a
//! temporary directory; the client address comes from axum's `MockConnectInfo`, since
//! `oneshot` has no socket). Every request gets an answer; none panics; nothing is
//! written outside staging and the store.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::connect_info::MockConnectInfo;
use axum::http::{HeaderValue, Request, StatusCode};
use base64ct::{Base64, Encoding};
use tower::ServiceExt;

use super::info::{Mode, UnitInfo};
use super::server::{FppState, Peer, router};
use super::store::PfxStore;

fn app(dir: &std::path::Path, hash: &str) -> axum::Router {
    std::fs::write(dir.join(pfx_store::MARKER), b"").expect("marker");
    let store = PfxStore::open(dir, None).expect("store");
    let (_sink, profiler) = crate::profiler::start(
        crate::profiler::ProfilerConfig {
            window: Duration::from_secs(1),
            fps: 20,
        },
        Vec::new(),
    );
    let unit = UnitInfo {
        hostname: "t".into(),
        uuid: "u".into(),
        player_version: "0".into(),
        mode: Mode::Player,
        multisync: false,
        ranges: vec![(0, 900)],
    };
    let state = FppState::new(
        "admin".into(),
        hash.into(),
        unit,
        Arc::new(store),
        profiler,
        1 << 30,
        dir.join("fpp-connect/playlist.json"),
    );
    router(state).layer(MockConnectInfo(Peer {
        remote: "10.9.9.9:5000".parse().expect("addr"),
        local: Some("10.9.9.1:80".parse().expect("addr")),
    }))
}

fn auth(pw: &str) -> String {
    format!(
        "Basic {}",
        Base64::encode_string(format!("admin:{pw}").as_bytes())
    )
}

async fn send(app: &axum::Router, req: Request<Body>) -> StatusCode {
    app.clone().oneshot(req).await.expect("infallible").status()
}

fn patch(pw: &str, name: &[u8], offset: &str, length: &str, body: Vec<u8>) -> Request<Body> {
    let mut r = Request::builder()
        .method("PATCH")
        .uri("/api/file/sequences")
        .header("authorization", auth(pw))
        .header("upload-offset", offset)
        .header("upload-length", length)
        .header("content-length", body.len().to_string())
        .body(Body::from(body))
        .expect("request");
    if let Ok(v) = HeaderValue::from_bytes(name) {
        r.headers_mut().insert("upload-name", v);
    }
    r
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[tokio::test]
async fn hostile_requests_get_answers_and_write_nothing() {
    let d = tempfile::tempdir().expect("tmp");
    let hash = super::auth::hash_password("pw").expect("hash");
    let app = app(d.path(), &hash);

    let no_auth = Request::get("/api/system/info")
        .body(Body::empty())
        .expect("req");
    assert_eq!(send(&app, no_auth).await, StatusCode::UNAUTHORIZED);
    let ok = Request::get("/api/system/info")
        .header("authorization", auth("pw"))
        .body(Body::empty())
        .expect("req");
    assert_eq!(send(&app, ok).await, StatusCode::OK);

    let cases: Vec<(Request<Body>, StatusCode)> = vec![
        (
            patch("pw", b"\xff\xfe.fseq", "0", "4", b"PSEQ".to_vec()),
            StatusCode::BAD_REQUEST,
        ),
        (
            patch("pw", b"../x.fseq", "0", "4", b"PSEQ".to_vec()),
            StatusCode::BAD_REQUEST,
        ),
        (
            patch("pw", b"a.fseq", "zero", "4", b"PSEQ".to_vec()),
            StatusCode::BAD_REQUEST,
        ),
        (
            patch("pw", b"a.fseq", "0", "-4", b"PSEQ".to_vec()),
            StatusCode::BAD_REQUEST,
        ),
        (
            patch("pw", b"a.fseq", "2", "4", b"PSEQ".to_vec()),
            StatusCode::BAD_REQUEST,
        ),
        (
            patch("pw", b"a.fseq", "4", "4", b"PSEQ".to_vec()),
            StatusCode::BAD_REQUEST,
        ),
        (
            patch(
                "pw",
                b"a.fseq",
                "0",
                "18446744073709551615",
                b"PSEQ".to_vec(),
            ),
            StatusCode::INSUFFICIENT_STORAGE,
        ),
        (
            patch("pw", b"a.fseq", "0", "4", b"NOPE".to_vec()),
            StatusCode::BAD_REQUEST,
        ),
        (
            Request::get("/api/sequence/..%2F..%2Fetc%2Fpasswd/meta")
                .header("authorization", auth("pw"))
                .body(Body::empty())
                .expect("req"),
            StatusCode::BAD_REQUEST,
        ),
        (
            Request::get("/api/sequence/Nope/meta")
                .header("authorization", auth("pw"))
                .body(Body::empty())
                .expect("req"),
            StatusCode::NOT_FOUND,
        ),
        (
            Request::post("/api/playlist/Main")
                .header("authorization", auth("pw"))
                .body(Body::from("{not json"))
                .expect("req"),
            StatusCode::BAD_REQUEST,
        ),
        (
            Request::post("/api/playlist/..")
                .header("authorization", auth("pw"))
                .body(Body::from("{}"))
                .expect("req"),
            StatusCode::BAD_REQUEST,
        ),
        (
            Request::builder()
                .method("PATCH")
                .uri("/api/file/music")
                .header("authorization", auth("pw"))
                .body(Body::from("x"))
                .expect("req"),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (i, (req, want)) in cases.into_iter().enumerate() {
        assert_eq!(send(&app, req).await, want, "case {i}");
    }
    // A chunk bigger than allowed is refused from its Content-Length, before the body.
    let mut big = patch("pw", b"a.fseq", "0", "99999999", Vec::new());
    big.headers_mut()
        .insert("content-length", HeaderValue::from_static("99999999"));
    assert_eq!(send(&app, big).await, StatusCode::PAYLOAD_TOO_LARGE);

    // Random Upload-Names: whatever is accepted, nothing lands outside the data directory.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let len = (rng.next() % 24) as usize;
        let alphabet = b"./\\\0a.fseq\x01\xff ";
        let name: Vec<u8> = (0..len)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        let st = send(&app, patch("pw", &name, "0", "4", b"PSEQ".to_vec())).await;
        assert!(
            st.is_client_error() || st.is_server_error(),
            "{name:?}: {st}"
        );
    }
    let outside: Vec<_> = std::fs::read_dir(d.path())
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            ![
                "staging",
                "store",
                "shows",
                "fpp-connect",
                pfx_store::MARKER,
            ]
            .contains(&n.as_str())
        })
        .collect();
    assert!(outside.is_empty(), "{outside:?}");
    assert_eq!(
        std::fs::read_dir(d.path().join("store/sha256"))
            .expect("dir")
            .count(),
        0
    );
}

async fn body_of(app: &axum::Router, req: Request<Body>) -> (StatusCode, serde_json::Value) {
    let r = app.clone().oneshot(req).await.expect("infallible");
    let st = r.status();
    let b = axum::body::to_bytes(r.into_body(), 1 << 20)
        .await
        .expect("body");
    (
        st,
        serde_json::from_slice(&b).unwrap_or(serde_json::Value::Null),
    )
}

/// What xLights sends besides sequences, answered as FPP would so its push ends without
/// an error box: media (kept, with the size xLights compares next time) and the output
/// table it reads and posts when the unit is its only player (kept, never applied).
#[tokio::test]
async fn media_and_the_output_table_are_kept_and_answered() {
    let d = tempfile::tempdir().expect("tmp");
    let hash = super::auth::hash_password("pw").expect("hash");
    let app = app(d.path(), &hash);
    let song = b"ID3 not really a song".to_vec();
    let mut up = patch(
        "pw",
        b"Song 1.mp3",
        "0",
        &song.len().to_string(),
        song.clone(),
    );
    *up.uri_mut() = "/api/file/music".parse().expect("uri");
    let (st, v) = body_of(&app, up).await;
    assert_eq!((st, v["status"].clone()), (StatusCode::OK, "OK".into()));
    let kept = d.path().join("fpp-connect/media/music/Song 1.mp3");
    assert_eq!(std::fs::read(&kept).expect("kept"), song);
    let meta = Request::get("/api/media/Song%201.mp3/meta")
        .header("authorization", auth("pw"))
        .body(Body::empty())
        .expect("req");
    let (st, v) = body_of(&app, meta).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["format"]["size"], song.len().to_string());
    // What /health and doctor print for this store (the running service publishes its
    // store's line; tests leave the process-wide one alone).
    let line = super::store::media_line(&super::store::kept_media(d.path()));
    assert!(
        line.contains("music/Song 1.mp3") && line.contains("pfx plays no audio"),
        "{line}"
    );
    let mut fx = patch("pw", b"a.eseq", "0", "4", b"ESEQ".to_vec());
    *fx.uri_mut() = "/api/file/effects".parse().expect("uri");
    assert_eq!(send(&app, fx).await, StatusCode::BAD_REQUEST);

    let get = |path: &str| {
        Request::get(path)
            .header("authorization", auth("pw"))
            .body(Body::empty())
            .expect("req")
    };
    let (st, v) = body_of(&app, get("/api/channel/output/universeOutputs")).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["channelOutputs"][0]["type"], "universes");
    let (st, v) = body_of(&app, get("/api/channel/output/co-pixelStrings")).await;
    assert_eq!(
        (st, v["channelOutputs"].clone()),
        (StatusCode::OK, serde_json::json!([]))
    );
    let post = |body: &str| {
        Request::post("/api/channel/output/universeOutputs")
            .header("authorization", auth("pw"))
            .body(Body::from(body.to_string()))
            .expect("req")
    };
    let table = d.path().join("fpp-connect/universeOutputs.json");
    let (st, v) = body_of(&app, post(r#"{"channelOutputs":[{"type":"universes","universes":[{"startChannel":0,"channelCount":5,"type":1}]}]}"#)).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(
        v["status"]
            .as_str()
            .unwrap_or("")
            .contains("universes[0].startChannel"),
        "{v}"
    );
    assert!(!table.exists(), "a refused table is not kept");
    let good = r#"{"channelOutputs":[{"type":"universes","enabled":1,"universes":[{"active":1,"startChannel":1,"channelCount":510,"type":1,"address":"10.0.0.9","id":1}]}]}"#;
    let (st, v) = body_of(&app, post(good)).await;
    assert_eq!((st, v["status"].clone()), (StatusCode::OK, "OK".into()));
    assert!(table.is_file(), "kept beside the show");
    // Kept, not applied: what the unit reports as its outputs is still its own.
    let (_, v) = body_of(&app, get("/api/channel/output/universeOutputs")).await;
    assert_eq!(v["channelOutputs"][0]["universes"], serde_json::json!([]));
}
