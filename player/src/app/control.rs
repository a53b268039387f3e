//! Live control's local channel and its part in the supervisor (docs/operator-guide.md,
//! "Show night").
//!
//! The channel is a Unix stream socket (`run --control-socket`, in the image
//! `/run/pfx-player/control.sock`: the service's runtime directory, mode 0700, the
//! socket 0600), never the network and never HTTP. A peer must be root or the player's
//! own user (SO_PEERCRED), so on a unit only root, that is the agent run by the fleet
//! account's forced command, can act. One request per connection, one JSON line each
//! way (`pfx_api::control::ControlRequest` in, `ControlAnswer` out); requests are taken
//! one at a time, so two operators acting at once end in the state of whichever came
//! last.
//!
//! The listener thread (`pfx-control`) hands each request to the supervisor, which
//! decides it (`engine::live::decide`, pure), builds an engine off the render thread
//! when the action needs one, hands the render thread one `Control::Live` message and
//! waits for the stamp of the frame that first carried it. A blackout is written to the
//! data partition (`pfx_store::held`) so that a restarted or rebooted unit starts black.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use pfx_api::control::{ControlAnswer, ControlRequest, ControlState};

use crate::config::show::Show;
use crate::engine::live::{self, CONTENT_PLAYLIST, Context, Persist};

/// What the unit holds now, shared with the HTTP thread (None: nothing held).
pub type ControlShared = Arc<Mutex<Option<ControlState>>>;

/// The longest a request line may be.
const MAX_REQUEST: u64 = 16 * 1024;
/// How long a peer has to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the listener waits for the supervisor's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// One request for the supervisor, and where its answer goes.
pub struct Pending {
    pub request: ControlRequest,
    pub answer: SyncSender<ControlAnswer>,
}

/// The listener; dropping it stops the thread and removes the socket.
pub struct ControlServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The peer's uid (SO_PEERCRED), None when the kernel does not say.
fn peer_uid(s: &UnixStream) -> Option<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: u32::MAX,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt(2) writes at most `len` bytes into `cred`, which outlives the call.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(cred.uid)
}

/// Whether a peer with `uid` may act: root, or the player's own user. Pure.
pub fn peer_allowed(uid: u32, own: u32) -> bool {
    uid == 0 || uid == own
}

/// Binds `path` (replacing a socket a previous player left; refusing any other file),
/// mode 0600, and starts the listener thread.
pub fn listen(path: &Path, unit: String, tx: Sender<Pending>) -> std::io::Result<ControlServer> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_socket() {
            // A socket someone still answers on is another player's: never take it over.
            if UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!(
                        "another player listens on {}; give this one its own --control-socket",
                        path.display()
                    ),
                ));
            }
            std::fs::remove_file(path)?;
        } else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; remove it or choose another --control-socket",
                    path.display()
                ),
            ));
        }
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let thread = std::thread::Builder::new()
        .name("pfx-control".into())
        .spawn(move || serve(listener, unit, tx, stop2))?;
    Ok(ControlServer {
        path: path.to_path_buf(),
        stop,
        thread: Some(thread),
    })
}

fn serve(listener: UnixListener, unit: String, tx: Sender<Pending>, stop: Arc<AtomicBool>) {
    // SAFETY: geteuid(2) cannot fail.
    let own = unsafe { libc::geteuid() };
    for conn in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut s) = conn else { continue };
        let answer = match peer_uid(&s) {
            Some(uid) if peer_allowed(uid, own) => one_request(&s, &unit, &tx),
            other => {
                tracing::warn!(
                    "live control: refused a peer with uid {other:?}: only root (the agent) may act"
                );
                refused(
                    &unit,
                    "only root (the unit's agent) may act on the player".into(),
                )
            }
        };
        match serde_json::to_string(&answer) {
            Ok(line) => {
                let _ = s.write_all(format!("{line}\n").as_bytes());
            }
            Err(e) => tracing::error!("live control: encoding the answer: {e}"),
        }
    }
}

fn one_request(s: &UnixStream, unit: &str, tx: &Sender<Pending>) -> ControlAnswer {
    let _ = s.set_read_timeout(Some(READ_TIMEOUT));
    let mut line = String::new();
    let read = std::io::Read::take(BufReader::new(s), MAX_REQUEST).read_line(&mut line);
    if let Err(e) = read {
        return refused(unit, format!("reading the request: {e}"));
    }
    let request: ControlRequest = match serde_json::from_str(line.trim()) {
        Ok(r) => r,
        Err(e) => return refused(unit, format!("not a control request: {e}")),
    };
    let (atx, arx) = sync_channel(1);
    if tx
        .send(Pending {
            request,
            answer: atx,
        })
        .is_err()
    {
        return refused(unit, "the player is stopping".into());
    }
    arx.recv_timeout(ANSWER_TIMEOUT).unwrap_or_else(|_| {
        refused(
            unit,
            "the player did not answer in time; ask for its state again".into(),
        )
    })
}

/// A refusal: nothing changed.
pub fn refused(unit: &str, why: String) -> ControlAnswer {
    ControlAnswer {
        unit: unit.to_string(),
        accepted: false,
        error: Some(why),
        reached_player: true,
        ..Default::default()
    }
}

/// What the show offers an action: its playlists (an unscheduled show's
/// `content.playlist` is `content`), its outputs, the unit's brightness cap.
pub fn context(show: &Show, remote: bool) -> Context {
    let playlists = if show.schedule.is_some() {
        show.playlists.keys().cloned().collect()
    } else if show.playlist.is_empty() {
        Vec::new()
    } else {
        vec![CONTENT_PLAYLIST.to_string()]
    };
    Context {
        playlists,
        outputs: show.outputs.iter().map(|o| o.name.clone()).collect(),
        brightness_max: show.config.control.brightness_max,
        remote,
    }
}

/// The items of playlist `name` in `show` (as `context` names them).
pub fn playlist_items<'a>(show: &'a Show, name: &str) -> Option<&'a [crate::config::show::Item]> {
    if show.schedule.is_none() && name == CONTENT_PLAYLIST {
        return Some(&show.playlist);
    }
    show.playlists.get(name).map(Vec::as_slice)
}

/// Writes or removes the held blackout as `persist` says: whether it is on the data
/// partition now (None when this is not a blackout) and why not.
pub fn persist(
    store: Option<&Path>,
    persist: Persist,
    state: &ControlState,
) -> (Option<bool>, Option<String>) {
    match (persist, store) {
        (Persist::Leave, _) => (None, None),
        (Persist::Clear, None) => (None, None),
        (Persist::Clear, Some(root)) => match pfx_store::held::clear(root) {
            Ok(()) => (None, None),
            Err(e) => {
                tracing::error!("live control: cannot remove the held blackout: {e}");
                (
                    None,
                    Some(format!(
                        "the held blackout could not be removed ({e}): a restart would come back black"
                    )),
                )
            }
        },
        (Persist::Write, None) => (
            Some(false),
            Some(
                "the player has no data partition (--store): this blackout does not survive a restart"
                    .into(),
            ),
        ),
        (Persist::Write, Some(root)) => {
            let r = serde_json::to_vec_pretty(state)
                .map_err(|e| e.to_string())
                .and_then(|b| pfx_store::held::write(root, &b).map_err(|e| e.to_string()));
            match r {
                Ok(()) => (Some(true), None),
                Err(e) => {
                    tracing::error!("live control: the blackout is not kept on disk: {e}");
                    (
                        Some(false),
                        Some(format!(
                            "black now, but not kept on the data partition ({e}): a restart would light up"
                        )),
                    )
                }
            }
        }
    }
}

/// The blackout a previous run kept on the data partition, to hold from the first frame.
pub fn restore(store: Option<&Path>) -> Option<ControlState> {
    let root = store?;
    match pfx_store::held::read(root) {
        Ok(None) => None,
        Ok(Some(bytes)) => match serde_json::from_slice::<ControlState>(&bytes) {
            Ok(s) => {
                let s = live::restore(s);
                if let Some(s) = &s {
                    tracing::warn!(
                        "live control: a blackout is held ({}); the show stays black until `pfx-fleet control resume`",
                        s.summary()
                    );
                }
                s
            }
            Err(e) => {
                // Black is the safe reading of a file that says something else: it was
                // written only for a blackout.
                tracing::error!(
                    "live control: {} is not a held override ({e}); holding black to be safe",
                    pfx_store::held::path(root).display()
                );
                Some(ControlState {
                    content: Some(pfx_api::control::Action::Blackout),
                    content_by: Some("unreadable held file".into()),
                    ..Default::default()
                })
            }
        },
        Err(e) => {
            tracing::error!("live control: cannot read the held blackout: {e}");
            None
        }
    }
}

/// Publishes `state` for `/profile` and the dashboard.
pub fn publish(shared: &ControlShared, state: &ControlState) {
    if let Ok(mut g) = shared.lock() {
        *g = (!state.is_clear()).then(|| state.clone());
    }
}

/// Waits for the render thread's stamp of the frame that carried an override.
pub fn wait_stamp(rx: &Receiver<u64>, fps: u32) -> Option<u64> {
    let frame_ms = 1000 / u64::from(fps.max(1));
    rx.recv_timeout(Duration::from_millis(2000 + 3 * frame_ms))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_root_and_the_player_itself_may_act() {
        assert!(peer_allowed(0, 990));
        assert!(peer_allowed(990, 990));
        assert!(!peer_allowed(1000, 990));
        assert!(!peer_allowed(u32::MAX, 990));
    }

    #[test]
    fn a_blackout_is_kept_on_the_data_partition_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let state = ControlState {
            content: Some(pfx_api::control::Action::Blackout),
            content_by: Some("alice@local".into()),
            content_since_unix_ms: Some(5),
            ..Default::default()
        };
        // No data partition mounted there: black now, but said not to be kept.
        let (held, note) = persist(Some(d.path()), Persist::Write, &state);
        assert_eq!(held, Some(false));
        assert!(note.unwrap().contains("not kept"));
        assert_eq!(restore(Some(d.path())), None);
        std::fs::write(d.path().join(pfx_store::MARKER), b"").unwrap();
        assert_eq!(
            persist(Some(d.path()), Persist::Write, &state),
            (Some(true), None)
        );
        assert_eq!(restore(Some(d.path())), Some(state.clone()));
        persist(Some(d.path()), Persist::Clear, &ControlState::default());
        assert_eq!(restore(Some(d.path())), None);
        // A garbled held file holds black.
        pfx_store::held::write(d.path(), b"{not json").unwrap();
        let s = restore(Some(d.path())).unwrap();
        assert_eq!(s.content, Some(pfx_api::control::Action::Blackout));
        assert_eq!(persist(None, Persist::Write, &state).0, Some(false));
    }
}
