//! The FPP API routes xLights uses (docs/fpp-connect.md 2.3), behind HTTP Basic.
//! Every handler answers; none panics on what a client sends.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch};
use axum::{Json, Router};
use serde_json::{Value, json};

use super::auth::{self, Limiter, Verdict};
use super::info::{self, UnitInfo};
use super::names;
use super::showmap;
use super::store::{Activated, ShowStore};
use super::upload::{Dir, Done, Refusal, Uploads};
use crate::http::timed_io::TimedListener;
use crate::profiler::ProfilerHandle;

/// Body limit of everything but an upload chunk.
pub const JSON_LIMIT: usize = 1024 * 1024;
/// A request (an upload chunk included) that takes longer than this is cut off.
pub const HANDLER_TIMEOUT: Duration = Duration::from_secs(180);
/// A connection idle this long is closed.
pub const IO_IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// Who is on the other end, and which of our addresses they reached.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    pub remote: SocketAddr,
    pub local: Option<SocketAddr>,
}

impl Connected<axum::serve::IncomingStream<'_, TimedListener>> for Peer {
    fn connect_info(s: axum::serve::IncomingStream<'_, TimedListener>) -> Peer {
        Peer {
            remote: *s.remote_addr(),
            local: s.io().local_addr().ok(),
        }
    }
}

/// What plays now, as far as FPP Connect made it.
#[derive(Debug, Clone, Default)]
struct Current {
    playlist: Option<String>,
    /// The last playlist JSON posted, as stored.
    json: Option<Value>,
    sequences: Vec<String>,
}

pub struct Inner {
    pub user: String,
    pub hash: String,
    pub unit: UnitInfo,
    pub store: Arc<dyn ShowStore>,
    pub profiler: ProfilerHandle,
    uploads: Arc<Mutex<Uploads>>,
    limiter: Mutex<Limiter>,
    current: Mutex<Current>,
    /// Where the last posted playlist is kept across restarts.
    playlist_file: PathBuf,
    /// One upload body in memory at a time.
    upload_gate: tokio::sync::Semaphore,
    /// One show switch at a time.
    activate_gate: tokio::sync::Mutex<()>,
    /// `fpp_connect.switch: now`: a new show starts at once, not at the item's end.
    pub switch_now: bool,
    /// The show's outputs in FPP's layout (`GET .../universeOutputs`), and as pieces to
    /// compare a posted table with.
    pub outputs_json: Value,
    pub our_pieces: Vec<super::outputs::Piece>,
}

#[derive(Clone)]
pub struct FppState(pub Arc<Inner>);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_ms() -> u64 {
    crate::sys::time::mono_ns() / 1_000_000
}

impl FppState {
    pub fn new(
        user: String,
        hash: String,
        unit: UnitInfo,
        store: Arc<dyn ShowStore>,
        profiler: ProfilerHandle,
        rate_bytes_s: u64,
        playlist_file: PathBuf,
    ) -> FppState {
        let mut current = Current::default();
        if let Ok(text) = std::fs::read(&playlist_file)
            && let Ok(v) = serde_json::from_slice::<Value>(&text)
        {
            current.playlist = v.get("name").and_then(Value::as_str).map(str::to_string);
            current.sequences = showmap::sequences_of(&v).unwrap_or_default();
            current.json = Some(v);
        }
        let uploads = Uploads::new(store.staging_dir(), rate_bytes_s);
        FppState(Arc::new(Inner {
            user,
            hash,
            unit,
            store,
            profiler,
            uploads: Arc::new(Mutex::new(uploads)),
            limiter: Mutex::new(Limiter::default()),
            current: Mutex::new(current),
            playlist_file,
            upload_gate: tokio::sync::Semaphore::new(1),
            activate_gate: tokio::sync::Mutex::new(()),
            switch_now: false,
            outputs_json: super::outputs::universe_outputs(&[]),
            our_pieces: Vec::new(),
        }))
    }
}

pub fn router(state: FppState) -> Router {
    Router::new()
        .route("/api/fppd/multiSyncSystems", get(multisync_systems))
        .route("/api/system/info", get(system_info))
        .route("/api/fppd/status", get(status))
        .route("/api/playlists", get(playlists))
        .route("/api/sequence/{name}/meta", get(sequence_meta))
        .route("/api/media/{name}/meta", get(media_meta))
        .route(
            "/api/channel/output/{file}",
            get(get_channel_output).post(post_channel_output),
        )
        .route("/api/file/{dir}", patch(upload))
        .route(
            "/api/playlist/{name}",
            get(get_playlist).post(post_playlist),
        )
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(JSON_LIMIT))
        .layer(middleware::from_fn_with_state(state.clone(), require_auth))
        .layer(middleware::from_fn(timeout))
        .with_state(state)
}

/// Serves the router on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: FppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = TimedListener {
        inner: listener,
        idle: IO_IDLE_TIMEOUT,
    };
    axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<Peer>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

async fn timeout(req: Request, next: Next) -> Response {
    match tokio::time::timeout(HANDLER_TIMEOUT, next.run(req)).await {
        Ok(r) => r,
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "request timed out\n").into_response(),
    }
}

fn text(code: StatusCode, msg: impl Into<String>) -> Response {
    let mut m = msg.into();
    m.push('\n');
    (code, m).into_response()
}

fn unauthorized(msg: &str) -> Response {
    let mut r = text(StatusCode::UNAUTHORIZED, msg);
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"pfx\""),
    );
    r
}

fn too_many() -> Response {
    let mut r = text(
        StatusCode::TOO_MANY_REQUESTS,
        "too many wrong passwords or password checks; wait and try again",
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("60"));
    r
}

/// HTTP Basic on every route; see docs/fpp-connect.md 2.2.
async fn require_auth(
    State(s): State<FppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    req: Request,
    next: Next,
) -> Response {
    let ip = peer.remote.ip();
    let now = now_ms();
    let Some(h) = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.as_bytes().to_vec())
    else {
        return unauthorized("this unit needs the FPP Connect password");
    };
    let remembered = {
        let mut l = lock(&s.0.limiter);
        if l.is_locked(ip, now) {
            return too_many();
        }
        let r = l.remembered(&h, now);
        if !r && l.admit(ip, now) == Verdict::Limited {
            return too_many();
        }
        r
    };
    if remembered {
        return next.run(req).await;
    }
    let Some((user, password)) = auth::parse_basic(&h) else {
        return unauthorized("send the FPP Connect password with HTTP Basic");
    };
    let hash = s.0.hash.clone();
    let user_ok = user == s.0.user;
    // argon2 costs real CPU: on a blocking thread, which runs at background priority.
    let ok = tokio::task::spawn_blocking(move || auth::verify_password(&hash, &password))
        .await
        .unwrap_or(false)
        && user_ok;
    if ok {
        lock(&s.0.limiter).succeeded(ip, &h, now_ms());
        next.run(req).await
    } else {
        lock(&s.0.limiter).failed(ip, now_ms());
        tracing::warn!(client = %ip, "FPP Connect: wrong user or password");
        unauthorized("wrong user or password")
    }
}

async fn not_found() -> Response {
    text(
        StatusCode::NOT_FOUND,
        "not something pfx answers (docs/fpp-connect.md)",
    )
}

fn room(s: &FppState) -> (u64, u64) {
    s.0.store.room().unwrap_or((0, 0))
}

async fn multisync_systems(
    State(s): State<FppState>,
    ConnectInfo(peer): ConnectInfo<Peer>,
) -> Json<Value> {
    let addr = peer.local.map(|a| a.ip().to_string()).unwrap_or_default();
    Json(info::multisync_systems(&s.0.unit, &addr))
}

async fn system_info(State(s): State<FppState>) -> Json<Value> {
    let (free, total) = room(&s);
    Json(info::system_info(&s.0.unit, free, total))
}

async fn playlists(State(s): State<FppState>) -> Json<Value> {
    let c = lock(&s.0.current);
    Json(json!(c.playlist.iter().collect::<Vec<_>>()))
}

async fn status(State(s): State<FppState>) -> Json<Value> {
    let snap = s.0.profiler.snapshot();
    let playing = snap.fps > 0.0;
    let c = lock(&s.0.current).clone();
    let u = &s.0.unit;
    Json(json!({
        "fppd": "running",
        "status": if playing { 1 } else { 0 },
        "status_name": if playing { "playing" } else { "idle" },
        "mode": if u.mode == info::Mode::Remote { 8 } else { 2 },
        "mode_name": u.mode.name(),
        "host_name": u.hostname,
        "version": u.version_string(),
        "uuid": u.uuid,
        "multisync": u.multisync,
        "current_playlist": {
            "playlist": c.playlist.clone().unwrap_or_default(),
            "index": if c.sequences.is_empty() { "0" } else { "1" },
            "count": c.sequences.len().to_string(),
        },
        "current_sequence": c.sequences.first().cloned().unwrap_or_default(),
        "seconds_played": format!("{}", snap.uptime_s as u64),
    }))
}

async fn sequence_meta(State(s): State<FppState>, Path(name): Path<String>) -> Response {
    let name = match names::sequence_name(&name) {
        Ok(n) => n,
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let Some(path) = s.0.store.sequence(&name) else {
        return text(StatusCode::NOT_FOUND, format!("{name}: not on this unit"));
    };
    let res = tokio::task::spawn_blocking(move || crate::source::fseq::open(&path)).await;
    match res {
        Ok(Ok(f)) => Json(info::sequence_meta(&name, f.header())).into_response(),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{name}: {e}")),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "reading the sequence failed",
        ),
    }
}

fn refusal(r: Refusal) -> Response {
    let (code, m) = match r {
        Refusal::Bad(m) => (StatusCode::BAD_REQUEST, m),
        Refusal::Conflict(m) => (StatusCode::CONFLICT, m),
        Refusal::TooLarge(m) => (StatusCode::PAYLOAD_TOO_LARGE, m),
        Refusal::Busy(m) => (StatusCode::SERVICE_UNAVAILABLE, m),
        Refusal::NoRoom(m) => (StatusCode::INSUFFICIENT_STORAGE, m),
        Refusal::Internal(m) => (StatusCode::INTERNAL_SERVER_ERROR, m),
    };
    if code != StatusCode::CONFLICT {
        tracing::warn!("FPP Connect upload refused ({code}): {m}");
    }
    text(code, m)
}

fn header_number(h: &HeaderMap, key: &str) -> Result<u64, String> {
    let Some(v) = h.get(key) else {
        return Err(format!("{key}: missing"));
    };
    names::decimal(v.as_bytes()).ok_or_else(|| format!("{key}: not a decimal number"))
}

/// What an upload chunk's request says, checked before anything is read or written.
struct ChunkRequest {
    kind: Dir,
    name: String,
    offset: u64,
    length: u64,
    /// The chunk's Content-Length.
    chunk: u64,
}

/// The upload's directory and headers, checked; the status and message to answer with
/// when they do not make a chunk pfx takes.
fn chunk_request(dir: &str, headers: &HeaderMap) -> Result<ChunkRequest, (StatusCode, String)> {
    let Some(kind) = Dir::parse(dir) else {
        return Err((
            StatusCode::BAD_REQUEST,
            format!(
                "{dir}: pfx takes sequences, and music and videos (kept, not played), but no effects or other files"
            ),
        ));
    };
    let Some(raw_name) = headers.get("upload-name") else {
        return Err((StatusCode::BAD_REQUEST, "Upload-Name: missing".into()));
    };
    let checked = if kind == Dir::Sequences {
        names::check_name(raw_name.as_bytes())
    } else {
        names::check_plain(raw_name.as_bytes())
    };
    let name = match checked {
        Ok(n) => n.to_string(),
        Err(e) => return Err((StatusCode::BAD_REQUEST, format!("Upload-Name: {e}"))),
    };
    let bad = |m| (StatusCode::BAD_REQUEST, m);
    let offset = header_number(headers, "upload-offset").map_err(bad)?;
    let length = header_number(headers, "upload-length").map_err(bad)?;
    let chunk = match headers.get(header::CONTENT_LENGTH) {
        Some(v) => match names::decimal(v.as_bytes()) {
            Some(n) => n,
            None => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    "Content-Length: not a number".into(),
                ));
            }
        },
        None => {
            return Err((
                StatusCode::LENGTH_REQUIRED,
                "send each chunk with a Content-Length".into(),
            ));
        }
    };
    Ok(ChunkRequest {
        kind,
        name,
        offset,
        length,
        chunk,
    })
}

async fn upload(
    State(s): State<FppState>,
    Path(dir): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let ChunkRequest {
        kind,
        name,
        offset,
        length,
        chunk,
    } = match chunk_request(&dir, &headers) {
        Ok(c) => c,
        Err((code, m)) => return text(code, m),
    };
    let Ok(_permit) = s.0.upload_gate.acquire().await else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
    };
    let store = s.0.store.clone();
    let (room, _) = match store.room() {
        Ok(r) => r,
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("cannot read the free space of the data partition: {e}"),
            );
        }
    };
    if let Err(r) = lock(&s.0.uploads).check((kind, &name), offset, length, chunk, room, now_ms()) {
        return refusal(r);
    }
    // Content-Length was checked against the chunk limit above, so this bounds memory.
    let data = match axum::body::to_bytes(body, chunk as usize).await {
        Ok(b) if b.len() as u64 == chunk => b,
        Ok(b) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("got {} bytes, Content-Length said {chunk}", b.len()),
            );
        }
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("reading the chunk: {e}")),
    };
    let uploads = s.0.uploads.clone();
    let n = name.clone();
    let res = tokio::task::spawn_blocking(move || {
        lock(&uploads).write(store.as_ref(), kind, &n, &data, now_ms())
    })
    .await;
    written(res, kind, &name, &dir)
}

/// The answer to a chunk the writer took (or refused, or failed on); a whole file is
/// logged.
fn written(
    res: Result<Result<Done, Refusal>, tokio::task::JoinError>,
    kind: Dir,
    name: &str,
    dir: &str,
) -> Response {
    match res {
        Ok(Ok(Done::Partial(size))) => {
            Json(json!({"status": "OK", "file": name, "dir": dir, "size": size})).into_response()
        }
        Ok(Ok(Done::Stored { size, sha256 })) => {
            let hex: String = sha256.iter().map(|b| format!("{b:02x}")).collect();
            if kind == Dir::Sequences {
                tracing::info!(file = %name, size, sha256 = %hex, "FPP Connect: sequence stored");
            } else {
                tracing::warn!(
                    file = %name,
                    size,
                    "FPP Connect: {} file kept, not played: pfx plays no audio (the lights run on their own clock)",
                    kind.name()
                );
            }
            Json(json!({"status": "OK", "file": name, "dir": dir, "size": size})).into_response()
        }
        Ok(Err(r)) => refusal(r),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the upload writer failed",
        ),
    }
}

async fn get_playlist(State(s): State<FppState>, Path(name): Path<String>) -> Response {
    let c = lock(&s.0.current).clone();
    match (c.playlist, c.json) {
        (Some(p), Some(j)) if p == name => Json(j).into_response(),
        _ => text(
            StatusCode::NOT_FOUND,
            format!("{name}: no such playlist on this unit"),
        ),
    }
}

fn error_json(code: StatusCode, msg: String) -> Response {
    (code, Json(json!({"Status": "Error", "Message": msg}))).into_response()
}

/// `?switch=now` on a playlist POST: the operator (a script, `curl`) asks for the new show
/// at once rather than at the current item's end.
fn asks_for_now(uri: &axum::http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "switch=now"))
}

async fn post_playlist(
    State(s): State<FppState>,
    Path(name): Path<String>,
    uri: axum::http::Uri,
    body: Bytes,
) -> Response {
    let now = s.0.switch_now || asks_for_now(&uri);
    let name = match names::playlist_name(&name) {
        Ok(n) => n.to_string(),
        Err(e) => return error_json(StatusCode::BAD_REQUEST, format!("playlist name: {e}")),
    };
    let mut v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error_json(StatusCode::BAD_REQUEST, format!("not JSON: {e}")),
    };
    let seqs = match showmap::sequences_of(&v) {
        Ok(s) => s,
        Err(e) => return error_json(StatusCode::BAD_REQUEST, e),
    };
    for q in &seqs {
        if let Err(e) = names::check_name(q.as_bytes()) {
            return error_json(StatusCode::BAD_REQUEST, format!("sequenceName {q:?}: {e}"));
        }
        match s.0.store.sequence(q) {
            Some(_) => {}
            None => {
                return error_json(
                    StatusCode::BAD_REQUEST,
                    format!("{q} is not on this unit; upload it first"),
                );
            }
        }
    }
    let _g = s.0.activate_gate.lock().await;
    let store = s.0.store.clone();
    let pl = name.clone();
    let wanted = seqs.clone();
    let res = tokio::task::spawn_blocking(move || {
        let (cfg, base, from_store) = store.active_config()?;
        // A store show's files come along by name; a config show's paths are made absolute.
        let cfg = if from_store {
            cfg
        } else {
            showmap::rebase(&cfg, &base)
        };
        let refs: Vec<PathBuf> = wanted.iter().map(|q| store.sequence_ref(q)).collect();
        let next = showmap::with_playlist(cfg, &pl, &refs);
        store.activate(&pl, &next, &wanted, now)
    })
    .await
    .unwrap_or_else(|_| Err("the show switch failed".into()));
    let outcome = match res {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(playlist = %name, "FPP Connect: new show refused, the old one keeps playing: {e}");
            return error_json(StatusCode::UNPROCESSABLE_ENTITY, e);
        }
    };
    v["name"] = json!(name);
    let record = serde_json::to_vec_pretty(&v).unwrap_or_default();
    let file = s.0.playlist_file.clone();
    let _ = tokio::task::spawn_blocking(move || super::store::write_atomic(&file, &record)).await;
    match outcome {
        Activated::Unchanged => tracing::info!(
            playlist = %name,
            sequences = ?seqs,
            "FPP Connect: the posted playlist is the show playing now; nothing changes"
        ),
        Activated::Switched => tracing::info!(
            playlist = %name,
            sequences = ?seqs,
            "FPP Connect: new show active; it starts {}",
            if now { "now" } else { "when the current item ends" }
        ),
    }
    *lock(&s.0.current) = Current {
        playlist: Some(name),
        json: Some(v.clone()),
        sequences: seqs,
    };
    Json(v).into_response()
}

/// `GET /api/media/NAME/meta`: what xLights compares before it sends media again (the
/// size, in `format.size`, a string as FPP's ffprobe writes it).
async fn media_meta(State(s): State<FppState>, Path(name): Path<String>) -> Response {
    let name = match names::check_plain(name.as_bytes()) {
        Ok(n) => n.to_string(),
        Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let Some(path) = s.0.store.media(&name) else {
        return text(StatusCode::NOT_FOUND, format!("{name}: not on this unit"));
    };
    match std::fs::metadata(&path) {
        Ok(m) => Json(json!({
            "format": {"filename": name, "size": m.len().to_string()},
            "pfx": "kept, not played: pfx plays no audio",
        }))
        .into_response(),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{name}: {e}")),
    }
}

/// The output files xLights asks for while it discovers (its pixel-string probe) and
/// before it posts its table: pfx drives no local strings, so those are empty lists.
const EMPTY_OUTPUT_FILES: [&str; 4] = [
    "co-pixelStrings",
    "co-bbbStrings",
    "co-other",
    "channelOutputsJSON",
];

async fn get_channel_output(State(s): State<FppState>, Path(file): Path<String>) -> Response {
    if file == "universeOutputs" {
        return Json(s.0.outputs_json.clone()).into_response();
    }
    if EMPTY_OUTPUT_FILES.contains(&file.as_str()) {
        return Json(json!({"channelOutputs": [], "status": "OK"})).into_response();
    }
    (
        StatusCode::NOT_FOUND,
        Json(json!({"status": format!("ERROR: {file}: pfx keeps no such file")})),
    )
        .into_response()
}

/// `POST /api/channel/output/universeOutputs`: xLights' controller table, checked and
/// kept beside the show (`fpp-connect/universeOutputs.json`). It is never applied: the
/// show config says where frames go; `doctor` names where the two disagree.
async fn post_channel_output(
    State(s): State<FppState>,
    Path(file): Path<String>,
    body: Bytes,
) -> Response {
    if file != "universeOutputs" {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"status": format!("ERROR file not supported: {file}")})),
        )
            .into_response();
    }
    let mut v: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"status": format!("ERROR: not JSON: {e}")})),
            )
                .into_response();
        }
    };
    let posted = match super::outputs::posted_pieces(&v) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("FPP Connect: universeOutputs refused: {e}");
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({"status": format!("ERROR: {e}")})),
            )
                .into_response();
        }
    };
    let record = serde_json::to_vec_pretty(&v).unwrap_or_default();
    let path = s.0.store.universe_outputs_file();
    let p2 = path.clone();
    match tokio::task::spawn_blocking(move || super::store::write_atomic(&p2, &record)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("{}: {e}", path.display()),
            );
        }
        Err(_) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "writing the table failed",
            );
        }
    }
    let d = super::outputs::disagreements(&s.0.our_pieces, &posted);
    if d.is_empty() {
        tracing::info!(
            "FPP Connect: xLights' output table kept; it agrees with the show's outputs"
        );
    } else {
        tracing::warn!(
            "FPP Connect: xLights' output table kept, not applied; it disagrees with the show's outputs in {} place(s) (pfx-player doctor lists them): {}",
            d.len(),
            d.first().cloned().unwrap_or_default()
        );
    }
    v["status"] = json!("OK");
    Json(v).into_response()
}
