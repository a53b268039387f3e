//! HTTP: /profile /metrics /health /history and the dashboard. Read-only: every route is
//! a GET that reads the profiler; nothing here changes the unit. Runs on a tokio runtime,
//! never on the render thread.

pub mod metrics;
pub(crate) mod timed_io;

use std::future::Future;
use std::time::Duration;

use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::profiler::{HistoryPoint, ProfilerHandle};

/// The dashboard: one self-contained page (inline JS and SVG, nothing from the internet).
pub const DASHBOARD_HTML: &str = include_str!("dashboard.html");
/// A handler that takes longer than this answers 503.
pub const HANDLER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection that neither sends nor accepts a byte for this long is closed (slow clients
/// cannot hold connections open).
pub const IO_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone)]
pub struct HttpState {
    pub profiler: ProfilerHandle,
    pub unit_id: String,
    pub version: &'static str,
    /// What plays and why (written by `app` at each start and reload).
    /// (The same type as `app::showpick::ShowState`; http does not import app.)
    pub show: std::sync::Arc<std::sync::Mutex<Option<pfx_api::show::ShowInfo>>>,
    /// The show store (`run --store`), whose quarantined files `/health` reports.
    pub store: Option<std::path::PathBuf>,
    /// The live override held now (`app::control::ControlShared`; None: nothing held).
    pub control: std::sync::Arc<std::sync::Mutex<Option<pfx_api::control::ControlState>>>,
}

/// `GET /profile`: the snapshot plus who answered (the contract, in pfx-api).
pub use pfx_api::profile::ProfileDoc;

/// `GET /history`.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryDoc {
    pub unit: String,
    pub interval_s: f64,
    pub points: Vec<HistoryPoint>,
}

#[derive(Debug, Deserialize)]
pub struct HistoryQuery {
    /// Only points newer than this (unix ms).
    pub since: Option<u64>,
}

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/", get(dashboard))
        .route("/profile", get(profile))
        .route("/metrics", get(metrics_text))
        .route("/health", get(health))
        .route("/history", get(history))
        .route("/pixels", get(pixels))
        .layer(middleware::from_fn(timeout))
        .with_state(state)
}

/// Serves `router(state)` on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: HttpState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = timed_io::TimedListener {
        inner: listener,
        idle: IO_IDLE_TIMEOUT,
    };
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn timeout(req: Request, next: Next) -> Response {
    match tokio::time::timeout(HANDLER_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "request timed out\n").into_response(),
    }
}

fn health_text(s: &HttpState) -> String {
    match s.profiler.health() {
        Ok(()) => "ok".into(),
        Err(e) => e,
    }
}

async fn dashboard() -> Html<&'static str> {
    Html(DASHBOARD_HTML)
}

async fn profile(State(s): State<HttpState>) -> Json<ProfileDoc> {
    Json(ProfileDoc {
        unit: s.unit_id.clone(),
        version: s.version.to_string(),
        health: health_text(&s),
        snapshot: s.profiler.snapshot(),
        show: show_info(&s),
        control: control_info(&s),
    })
}

fn control_info(s: &HttpState) -> Option<pfx_api::control::ControlState> {
    s.control.lock().ok().and_then(|g| g.clone())
}

fn show_info(s: &HttpState) -> Option<pfx_api::show::ShowInfo> {
    s.show.lock().ok().and_then(|g| g.clone())
}

/// Media FPP Connect kept and the unit does not play (`fppconnect::store` sets it for
/// the running service's store); one per process.
static MEDIA_KEPT: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

pub fn set_media_kept(kept: Vec<String>) {
    *MEDIA_KEPT.lock().unwrap_or_else(|e| e.into_inner()) = kept;
}

/// The `/health` (and `doctor`) line for kept media; empty when there is none.
pub fn media_line(kept: &[String]) -> String {
    match kept.len() {
        0 => String::new(),
        n => format!(
            "media: {n} file(s) uploaded by FPP Connect are kept ({}{}), not played: pfx plays no audio; the lights run on their own clock\n",
            kept.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if n > 3 { ", ..." } else { "" }
        ),
    }
}

/// A second line for `/health` when the config show plays in place of the store's, and
/// one when FPP Connect kept media the unit does not play.
fn fallback_line(s: &HttpState) -> String {
    let media = media_line(&MEDIA_KEPT.lock().unwrap_or_else(|e| e.into_inner()));
    match show_info(s).and_then(|i| i.reason) {
        Some(r) => format!("show: playing the config show: {r}\n{media}"),
        None => media,
    }
}

/// A line for `/health` when the store has quarantined stored files (their content did
/// not match their names): the show plays on, but the operator should push it again.
pub fn quarantine_line(store: Option<&std::path::Path>) -> String {
    let Some(root) = store else {
        return String::new();
    };
    match pfx_store::quarantined(root) {
        Ok(q) if q.is_empty() => String::new(),
        Ok(q) => format!(
            "store: {} stored file(s) did not match their names and were quarantined in {} ({}); push the show again to resend them\n",
            q.len(),
            root.join(pfx_store::QUARANTINE).display(),
            q.iter()
                .take(3)
                .map(|f| f.hash.chars().take(16).collect::<String>())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Err(e) => format!("store: cannot read its quarantine: {e}\n"),
    }
}

async fn history(State(s): State<HttpState>, Query(q): Query<HistoryQuery>) -> Json<HistoryDoc> {
    Json(HistoryDoc {
        unit: s.unit_id.clone(),
        interval_s: 1.0,
        points: s.profiler.history(q.since),
    })
}

async fn metrics_text(State(s): State<HttpState>) -> Response {
    let healthy = s.profiler.health().is_ok();
    let body = metrics::render(&s.profiler.snapshot(), &s.unit_id, s.version, healthy)
        + &metrics::render_control(control_info(&s).as_ref());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

async fn health(State(s): State<HttpState>) -> Response {
    match s.profiler.health() {
        Ok(()) => (
            StatusCode::OK,
            format!(
                "ok\n{}{}",
                fallback_line(&s),
                quarantine_line(s.store.as_deref())
            ),
        )
            .into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{e}\n{}{}",
                fallback_line(&s),
                quarantine_line(s.store.as_deref())
            ),
        )
            .into_response(),
    }
}

/// At most this many `/pixels` requests at once; more answer 503. Each holds one copy
/// of the frame's pixels while it is sent, so this bounds what viewers can make the
/// player hold.
pub const PIXEL_VIEWERS_MAX: usize = 8;
/// How long a `/pixels` request waits for the render thread's next copy before it
/// answers with the newest one there is (a player between shows, or a slow frame).
pub const PIXELS_WAIT: Duration = Duration::from_millis(250);

static PIXEL_VIEWERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One `/pixels` request in flight (released on drop, also when the client goes away).
struct Viewer;

impl Viewer {
    fn enter() -> Option<Viewer> {
        use std::sync::atomic::Ordering::AcqRel;
        let prev = PIXEL_VIEWERS
            .fetch_update(AcqRel, std::sync::atomic::Ordering::Acquire, |n| {
                (n < PIXEL_VIEWERS_MAX).then_some(n + 1)
            })
            .ok();
        prev.map(|_| Viewer)
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        PIXEL_VIEWERS.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The body in pieces of 64 KiB that keep the viewer's slot until the last piece is taken
/// (or the client goes away): a client that reads slowly holds its slot, so slow readers
/// cannot pile up copies beyond `PIXEL_VIEWERS_MAX`.
fn held_body(body: Vec<u8>, viewer: Viewer) -> axum::body::Body {
    use futures::StreamExt;
    const PIECE: usize = 64 * 1024;
    let all = axum::body::Bytes::from(body);
    let pieces: Vec<_> = (0..all.len().div_ceil(PIECE))
        .map(|i| all.slice(i * PIECE..((i + 1) * PIECE).min(all.len())))
        .collect();
    let stream = futures::stream::iter(pieces).map(move |p| {
        let _slot = &viewer;
        Ok::<_, std::convert::Infallible>(p)
    });
    axum::body::Body::from_stream(stream)
}

/// `GET /pixels`: every output's pixels as the poles were last sent them (the binary
/// format of `crate::pixels`). Asks the render thread for a copy of its next frame and
/// waits for it a little, polling: the render thread never signals anyone.
async fn pixels() -> Response {
    let Some(viewer) = Viewer::enter() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "pixels: {PIXEL_VIEWERS_MAX} viewers are reading the pixels already; try again in a moment\n"
            ),
        )
            .into_response();
    };
    let board = &crate::pixels::BOARD;
    let seen = board.seq();
    board.want();
    let end = tokio::time::Instant::now() + PIXELS_WAIT;
    while board.seq() == seen && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(4)).await;
    }
    match board.encoded() {
        Some(body) => (
            [
                (header::CONTENT_TYPE, "application/octet-stream"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            held_body(body, viewer),
        )
            .into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "pixels: no frame sent yet (the player has not rendered since it started); try again in a moment\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests;
