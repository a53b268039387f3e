//! Router tests without sockets (tower's oneshot) and one over a real loopback socket.

use std::time::Duration;

use axum::body::{Body, to_bytes};
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use super::*;
use crate::engine::FrameSample;
use crate::profiler::{self, ProfilerConfig, SampleSink};

fn state() -> (SampleSink, HttpState) {
    let (sink, profiler) = profiler::start(
        ProfilerConfig {
            window: Duration::from_secs(5),
            fps: 60,
        },
        vec![],
    );
    (
        sink,
        HttpState {
            profiler,
            unit_id: "unit-\"7\"".into(),
            version: "0.1.0",
            show: Default::default(),
            store: None,
            control: Default::default(),
        },
    )
}

fn feed(sink: &mut SampleSink, st: &HttpState, n: u64) {
    for i in 0..n {
        sink.push(FrameSample {
            tick: i,
            stage_ns: [
                1_000,
                10_000,
                20_000,
                if i % 10 == 3 { 80_000_000 } else { 150_000 },
            ],
            frame_ns: 200_000,
            at_ns: i * 1_000_000_000 / 60,
            ..Default::default()
        });
    }
    for _ in 0..100 {
        if st.profiler.snapshot().since_start.frames >= n {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn get(st: &HttpState, uri: &str) -> (StatusCode, String, String) {
    let r = router(st.clone())
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = r.status();
    let ct = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = to_bytes(r.into_body(), 1 << 22).await.unwrap();
    (status, ct, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn profile_json_has_the_documented_fields() {
    let (mut sink, st) = state();
    feed(&mut sink, &st, 120);
    let (status, ct, body) = get(&st, "/profile").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("application/json"), "{ct}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["unit"], "unit-\"7\"");
    assert_eq!(v["health"], "ok");
    assert_eq!(v["frames"], 120);
    assert_eq!(v["window_s"], 5.0);
    assert_eq!(v["stages"]["wire_send"]["p50_us"], 150.0);
    assert_eq!(v["stages"]["wire_send"]["p95_us"], 80_000.0);
    assert_eq!(v["stages"]["wire_send"]["count"], 120);
    for k in ["p50_us", "p95_us", "p99_us", "max_us", "count"] {
        for s in [
            "background",
            "source",
            "geometry",
            "wire_send",
            "frame",
            "lateness",
        ] {
            assert!(v["stages"][s][k].is_number(), "stages.{s}.{k}");
            assert!(
                v["since_start"]["stages"][s][k].is_number(),
                "since_start.stages.{s}.{k}"
            );
        }
    }
    for k in [
        "deadline_misses",
        "skipped_ticks",
        "fps",
        "fps_target",
        "samples_lost",
        "outputs",
        "nic",
        "since_start",
    ] {
        assert!(v.get(k).is_some(), "{k}");
    }
}

#[tokio::test]
async fn metrics_health_history_and_dashboard() {
    let (mut sink, st) = state();
    feed(&mut sink, &st, 60);
    let (status, ct, body) = get(&st, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    assert!(body.contains("# TYPE pfx_stage_seconds gauge"));
    assert!(
        body.contains("pfx_stage_seconds{stage=\"wire_send\",quantile=\"0.95\"} 0.08\n"),
        "{body}"
    );
    assert!(body.contains("pfx_info{unit=\"unit-\\\"7\\\"\",version=\"0.1.0\"} 1"));
    assert!(body.contains("pfx_frames_total 60"));

    let (status, _, body) = get(&st, "/health").await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));

    let (status, ct, body) = get(&st, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(ct.starts_with("text/html"));
    assert!(body.contains("fetch(\"/history\"") && body.contains("fetch(\"/profile\")"));
    // self-contained: the only URL is the SVG namespace, no script/link/img from elsewhere
    let urls: Vec<&str> = body
        .match_indices("http")
        .map(|(i, _)| &body[i..(i + 30).min(body.len())])
        .collect();
    assert!(
        urls.iter()
            .all(|u| u.starts_with("http://www.w3.org/2000/svg")),
        "{urls:?}"
    );
    assert!(!body.contains("<link") && !body.contains("src="));
    // Per output, frames whole, in part and skipped (totals and per second) and
    // the universe that got least, read from /profile's fields of those names.
    for col in [
        "<th>whole</th>",
        "<th>in part</th>",
        "<th>skipped</th>",
        "<th>whole/s</th>",
        "<th>in part/s</th>",
        "<th>skipped/s</th>",
        "<th>slowest universe (frames/s)</th>",
    ] {
        assert!(body.contains(col), "{col}");
    }
    for field in [
        "o.frames_sent",
        "o.frames_partial",
        "o.frames_skipped",
        "frames_partial_per_s",
        "frames_skipped_per_s",
        "slowest_slot_per_s",
    ] {
        assert!(body.contains(field), "{field}");
    }

    // /history within about a second; ?since= filters
    let mut pts = serde_json::Value::Null;
    for _ in 0..30 {
        let (_, _, body) = get(&st, "/history").await;
        pts = serde_json::from_str::<serde_json::Value>(&body).unwrap()["points"].clone();
        if pts.as_array().is_some_and(|a| !a.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = pts.as_array().and_then(|a| a.last()).cloned().unwrap();
    assert!(last["stages"]["wire_send"]["p99_us"].is_number());
    let (_, _, body) = get(&st, &format!("/history?since={}", last["unix_ms"])).await;
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["points"].as_array().map(|a| a.len()), Some(0));

    // nothing over HTTP changes the unit
    let r = router(st.clone())
        .oneshot(Request::post("/profile").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn health_is_503_with_the_reason_when_the_loop_stalls() {
    let (mut sink, st) = state();
    feed(&mut sink, &st, 60);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (status, _, body) = get(&st, "/health").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body.starts_with("render loop stalled: no frame for "),
        "{body}"
    );
    let (_, _, body) = get(&st, "/metrics").await;
    assert!(body.contains("pfx_healthy 0"));
}

#[tokio::test]
async fn serves_over_a_real_loopback_socket() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut sink, st) = state();
    feed(&mut sink, &st, 60);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, st, async {
        let _ = rx.await;
    }));
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut resp = String::new();
    tokio::time::timeout(Duration::from_secs(5), c.read_to_string(&mut resp))
        .await
        .unwrap()
        .unwrap();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("\r\n\r\nok\n"), "{resp}");
    // the CLI's own client against the same server
    let url = format!("http://{addr}");
    let body = tokio::task::spawn_blocking(move || crate::cli::profile::get(&url, "/profile"))
        .await
        .unwrap()
        .unwrap();
    let doc: ProfileDoc = serde_json::from_slice(&body).unwrap();
    let table = crate::cli::profile::render(&doc);
    assert!(
        table.contains("wire_send         150.0    80000.0    80000.0    80000.0       60"),
        "{table}"
    );
    let _ = tx.send(());
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_silent_client_is_disconnected() {
    use tokio::io::AsyncReadExt;
    let (_sink, st) = state();
    let inner = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = inner.local_addr().unwrap();
    let listener = timed_io::TimedListener {
        inner,
        idle: Duration::from_millis(300),
    };
    let server = tokio::spawn(async move { axum::serve(listener, router(st)).await });
    // a client that sends half a request and then nothing
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut c, b"GET /health HTTP/1.1\r\n")
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let mut buf = Vec::new();
    let n = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut buf)).await;
    assert!(n.is_ok(), "server kept a silent connection open for 5 s");
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "closed too early: {:?}",
        t.elapsed()
    );
    server.abort();
}

/// `/profile` as the real profiler and router serve it, byte for byte against
/// `api/tests/golden/profile.json` (pretty there, compact on the wire). Only the fields that
/// differ on every run (uptime, CPU time, frame age, and health, which a loaded machine
/// could turn "stalled") are masked to the golden values.
#[tokio::test]
async fn profile_json_matches_the_golden_file() {
    use crate::output::counters::OutputCounters;
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Relaxed;
    let counters = Arc::new(OutputCounters::default());
    counters.packets.store(432_000, Relaxed);
    counters.bytes.store(275_616_000, Relaxed);
    counters.frames_sent.store(215_990, Relaxed);
    counters.frames_dropped.store(10, Relaxed);
    // A two-universe pole: 2 × (126 + 510) bytes.
    counters.frame_bytes.store(1272, Relaxed);
    counters.frame_datagrams.store(2, Relaxed);
    for _ in 0..10 {
        counters.count_errno(libc::EAGAIN);
    }
    counters.count_errno(libc::EIO);
    let (mut sink, profiler) = profiler::start(
        ProfilerConfig {
            window: Duration::from_secs(5),
            fps: 60,
        },
        vec![profiler::OutputInfo {
            name: "poles-a".into(),
            protocol: "sacn".into(),
            destination: "239.255.0.1:5568".into(),
            counters,
        }],
    );
    let st = HttpState {
        profiler,
        unit_id: "gen3-7".into(),
        version: "0.1.0",
        show: std::sync::Arc::new(std::sync::Mutex::new(Some(golden_show()))),
        store: None,
        control: Default::default(),
    };
    st.profiler.set_nic(crate::nic::golden_status());
    // Rates need two readings, one second apart; the frames come after them, so the
    // window still holds every frame when /profile is read.
    for _ in 0..200 {
        if st
            .profiler
            .snapshot()
            .outputs
            .first()
            .is_some_and(|o| o.rates.is_some())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    feed(&mut sink, &st, 60);
    let (status, _, body) = get(&st, "/profile").await;
    assert_eq!(status, StatusCode::OK);
    let mut wire = body;
    for (k, v) in [
        ("health", "\"ok\""),
        ("last_frame_age_ms", "12.5"),
        ("uptime_s", "3.25"),
        ("profiler_cpu_s", "0.01"),
    ] {
        wire = pfx_api::golden::mask(&wire, k, v);
    }
    if std::env::var_os("PFX_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        // Pretty-print in the wire's own key order (a serde_json::Value would sort it).
        let mut doc = ProfileDoc {
            unit: st.unit_id.clone(),
            version: st.version.into(),
            health: "ok".into(),
            snapshot: st.profiler.snapshot(),
            show: Some(golden_show()),
            control: None,
        };
        doc.snapshot.last_frame_age_ms = Some(12.5);
        doc.snapshot.uptime_s = 3.25;
        doc.snapshot.profiler_cpu_s = 0.01;
        let pretty = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        assert_eq!(pfx_api::golden::minify(&pretty), wire, "snapshot moved on");
        pfx_api::golden::check("profile.json", &pretty);
    }
    let golden = pfx_api::golden::minify(&pfx_api::golden::read("profile.json"));
    assert!(
        golden == wire,
        "/profile differs from api/tests/golden/profile.json\n--- golden\n{golden}\n--- served\n{wire}"
    );
}

/// The golden document's `show`: the store's show, with a fixed start time.
fn golden_show() -> pfx_api::show::ShowInfo {
    pfx_api::show::ShowInfo {
        name: "evening".into(),
        id: Some("0123456789abcdef".into()),
        source: pfx_api::show::ShowSource::Store,
        since_unix_ms: Some(1_764_590_400_000),
        reason: None,
    }
}

#[tokio::test]
async fn health_says_why_the_config_show_plays() {
    let (_sink, mut st) = state();
    st.show = std::sync::Arc::new(std::sync::Mutex::new(Some(
        crate::app::showpick::config_info(
            std::path::Path::new("/etc/pfx/show.yaml"),
            Some("the data partition is not mounted at /var/lib/pfx".into()),
        ),
    )));
    let (_, _, body) = get(&st, "/health").await;
    let text = body;
    assert!(
        text.contains(
            "show: playing the config show: the data partition is not mounted at /var/lib/pfx"
        ),
        "{text}"
    );
    let (_, _, body) = get(&st, "/profile").await;
    let doc: ProfileDoc = serde_json::from_str(&body).unwrap();
    let show = doc.show.unwrap();
    assert_eq!(show.source, pfx_api::show::ShowSource::Config);
    assert_eq!(show.name, "show.yaml");
}

/// Issue 25: a stored file whose content does not match its name is quarantined by the
/// store; `/health` says so (the show plays on: still 200).
#[tokio::test]
async fn health_names_quarantined_store_files() {
    let (_sink, mut st) = state();
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join(pfx_store::MARKER), b"").unwrap();
    st.store = Some(d.path().to_path_buf());
    let (_, _, body) = get(&st, "/health").await;
    assert!(!body.contains("quarantined"), "{body}");
    let s = pfx_store::Store::open(d.path()).unwrap();
    let h = s.put_bytes("k", b"right").unwrap();
    std::fs::write(s.blob_path(&h), b"wrong").unwrap();
    pfx_store::Store::open(d.path()).unwrap();
    let (_, _, body) = get(&st, "/health").await;
    assert!(
        body.contains("1 stored file(s) did not match their names and were quarantined")
            && body.contains(&h.to_string()[..16])
            && body.contains("push the show again"),
        "{body}"
    );
}

/// `/pixels` over the router: a thread stands in for the render thread (offering a frame
/// every 5 ms, as the loop does after each send), the answer decodes to what it offered;
/// with every viewer slot taken the route answers 503 and holds nothing, and frees again.
/// One test: the board and the viewer count are the process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pixels_answers_the_offered_frame_and_bounds_its_viewers() {
    use crate::config::{ColorOrder, PixelFormat};
    use crate::geometry::PoleMap;
    let (_sink, st) = state();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = stop.clone();
    let render = std::thread::spawn(move || {
        let map = PoleMap {
            start: 0,
            pixels: 3,
            format: PixelFormat::Rgb8,
            order: ColorOrder::Grb,
        };
        let px = [10u8, 20, 30, 40, 50, 60, 70, 80, 90];
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            crate::pixels::BOARD.offer(42, [("http-test-pole", &map, &px[..])].into_iter());
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let fetch = |st: HttpState| async move {
        let r = router(st)
            .oneshot(Request::get("/pixels").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = r.status();
        (status, to_bytes(r.into_body(), 1 << 22).await.unwrap())
    };
    // Another test's render loop in this process may offer too: ours is the one named so.
    let mut got = None;
    for _ in 0..20 {
        let (status, body) = fetch(st.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let s = crate::pixels::decode(&body).expect("decodes");
        if s.outputs
            .first()
            .is_some_and(|o| o.name == "http-test-pole")
        {
            got = Some(s);
            break;
        }
    }
    let s = got.expect("the offered frame");
    assert_eq!(s.sent_unix_us, 42);
    assert_eq!(s.outputs[0].order, [1, 0, 2]);
    assert_eq!(s.outputs[0].data, vec![10, 20, 30, 40, 50, 60, 70, 80, 90]);

    // A client that has not read its body yet still holds its slot; it frees when the
    // response goes away.
    let r = router(st.clone())
        .oneshot(Request::get("/pixels").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        PIXEL_VIEWERS.load(std::sync::atomic::Ordering::Acquire),
        1,
        "an unread body holds its viewer slot"
    );
    drop(r);
    assert_eq!(PIXEL_VIEWERS.load(std::sync::atomic::Ordering::Acquire), 0);

    let held: Vec<_> = (0..PIXEL_VIEWERS_MAX)
        .map(|_| Viewer::enter().expect("a free viewer slot"))
        .collect();
    let (status, body) = fetch(st.clone()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(String::from_utf8_lossy(&body).contains("viewers are reading"));
    drop(held);
    let (status, _) = fetch(st.clone()).await;
    assert_eq!(status, StatusCode::OK, "the slots free on drop");
    // Only GET: nothing here changes anything.
    let r = router(st.clone())
        .oneshot(Request::post("/pixels").body(Body::from("x")).unwrap())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    render.join().unwrap();
}
