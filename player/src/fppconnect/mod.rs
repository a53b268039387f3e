//! FPP Connect: xLights puts sequences and a playlist on the unit as it does on a Falcon
//! Player (docs/fpp-connect.md). Off unless the show config's `fpp_connect.enabled`.
//!
//! - `names`: what an upload may be called, header numbers (pure; fuzzed).
//! - `auth`: HTTP Basic against an argon2 hash, failed attempts rate-limited (pure limiter).
//! - `info`: the unit's channel ranges, the JSON documents, sequence meta, the v3 ping (pure).
//! - `upload`: checks before a byte is written, staging, hashing, hand-over to the store.
//! - `store`: the interface to the show store, and a plain one on the data directory.
//! - `showmap`: an FPP playlist → the unit's next show config (pure).
//! - `outputs`: the show's outputs in FPP's universe-output layout, the checks on a table
//!   xLights posts, and where the two disagree (pure).
//! - `server`: the HTTP routes.
//!
//! Everything runs on its own threads at background priority (nice 19, idle I/O): the
//! HTTP server and its blocking pool, the discover-ping listener and the answerer
//! (`spawn_answerer`, which the sync socket uses too). Nothing here
//! touches the render thread; a new show reaches it through the supervisor's reload.

pub mod auth;
pub mod info;
pub mod names;
pub mod outputs;
pub mod server;
pub mod showmap;
pub mod store;
pub mod upload;

#[cfg(test)]
mod tests;

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;

use crate::config::show::{FppConnectConfig, Show, SyncRole};
use crate::profiler::ProfilerHandle;
use info::{Mode, UnitInfo};

/// The unit as discovery describes it, from its show.
pub fn unit_info(show: &Show, unit_id: &str, version: &str) -> UnitInfo {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_bytes(*b"pfx-fppconnect!!");
    let ranges = info::merge_ranges(
        show.outputs
            .iter()
            .map(|o| (o.start as u32, o.profile.channels() as u32))
            .collect(),
    );
    let role = show.sync.as_ref().map(|s| s.role);
    UnitInfo {
        hostname: unit_id.to_string(),
        uuid: uuid::Uuid::new_v5(&NAMESPACE, unit_id.as_bytes()).to_string(),
        player_version: version.to_string(),
        mode: if role == Some(SyncRole::Remote) {
            Mode::Remote
        } else {
            Mode::Player
        },
        multisync: role == Some(SyncRole::Master),
        ranges,
    }
}

/// Whether the MultiSync socket (`app::sync`) is open for this show: it then answers the
/// discover pings itself, from the same identity (`unit_info`), and FPP Connect opens no
/// second socket on the port (two SO_REUSEPORT sockets would split the unicast sync
/// packets between them).
fn sync_answers_pings(show: &Show) -> bool {
    show.sync
        .as_ref()
        .is_some_and(|s| s.role != SyncRole::Standalone)
}

/// The running service; dropping it stops the HTTP server and the ping responder.
pub struct FppConnect {
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    http: Option<JoinHandle<()>>,
    stop: Arc<AtomicBool>,
    ping: Option<JoinHandle<()>>,
}

impl Drop for FppConnect {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        for t in [self.http.take(), self.ping.take()].into_iter().flatten() {
            let _ = t.join();
        }
    }
}

fn background(thread: &str) {
    if let Err(e) = crate::sys::sched::set_background() {
        tracing::debug!("{thread}: stays at normal priority ({e})");
    }
}

/// Starts FPP Connect for `show`. `running_config` is the config the supervisor reloads
/// on SIGHUP. Binds first, on this thread, so a taken port 80 is an error at start.
pub fn start(
    cfg: &FppConnectConfig,
    show: &Show,
    unit: UnitInfo,
    profiler: ProfilerHandle,
    running_config: Option<PathBuf>,
    store_root: Option<PathBuf>,
) -> anyhow::Result<FppConnect> {
    let hash = cfg
        .password_hash
        .clone()
        .context("fpp_connect.password_hash: missing")?;
    let st = open_store(store_root, running_config)?;
    // What FPP Connect creates in the store is group-writable, as the agent's is: both
    // write the same tree through the data partition's set-gid group (docs/show-store.md).
    // SAFETY: umask(2) only sets the process's file mode mask; it cannot fail.
    unsafe {
        libc::umask(0o002);
    }
    st.publish_to_health();
    let playlist_file = st.root().join("fpp-connect/playlist.json");
    let std_listener = std::net::TcpListener::bind(cfg.http).with_context(|| {
        format!(
            "FPP Connect: cannot serve HTTP on {}; xLights needs port 80 (set fpp_connect.http only for tests)",
            cfg.http
        )
    })?;
    std_listener.set_nonblocking(true)?;
    let ping_sock = if sync_answers_pings(show) {
        None
    } else {
        Some(
            ping_socket(&show.config.interface)
                .context("FPP Connect: cannot listen for discover pings on UDP 32320")?,
        )
    };
    let mut state = server::FppState::new(
        cfg.user.clone(),
        hash,
        unit.clone(),
        Arc::new(st),
        profiler,
        u64::from(cfg.write_rate_mib_s) * 1024 * 1024,
        playlist_file,
    );
    if let Some(inner) = Arc::get_mut(&mut state.0) {
        inner.switch_now = cfg.switch == crate::config::show::FppSwitch::Now;
        inner.outputs_json = outputs::universe_outputs(&show.outputs);
        inner.our_pieces = outputs::our_pieces(&show.outputs);
    }
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let http = spawn_http(std_listener, state, rx)?;
    let stop = Arc::new(AtomicBool::new(false));
    let ping = match ping_sock {
        Some(sock) => {
            let stop = stop.clone();
            Some(
                std::thread::Builder::new()
                    .name("pfx-fppc-ping".into())
                    .spawn(move || {
                        background("pfx-fppc-ping");
                        answer_pings(sock, unit, stop)
                    })?,
            )
        }
        None => None,
    };
    tracing::info!(http = %cfg.http, "FPP Connect on (discover pings on UDP 32320)");
    Ok(FppConnect {
        shutdown: Some(tx),
        http: Some(http),
        stop,
        ping,
    })
}

/// The show store FPP Connect writes into, or why FPP Connect is off.
fn open_store(
    store_root: Option<PathBuf>,
    running_config: Option<PathBuf>,
) -> anyhow::Result<store::PfxStore> {
    let root = store_root.context(
        "FPP Connect needs the show store: run the player with --store /var/lib/pfx (the image's service does)",
    )?;
    store::PfxStore::open(&root, running_config).map_err(|e| {
        anyhow::anyhow!(
            "FPP Connect off: the show store at {} cannot be used: {e}",
            root.display()
        )
    })
}

/// The HTTP server's thread: a small runtime at background priority serving `state` on
/// `std_listener` until `shutdown` fires.
fn spawn_http(
    std_listener: std::net::TcpListener,
    state: server::FppState,
    shutdown: tokio::sync::oneshot::Receiver<()>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("pfx-fppconnect".into())
        .spawn(move || {
            background("pfx-fppconnect");
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .max_blocking_threads(2)
                .thread_name("pfx-fppc-io")
                .on_thread_start(|| background("pfx-fppconnect blocking"))
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("FPP Connect runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                let listener = match tokio::net::TcpListener::from_std(std_listener) {
                    Ok(l) => l,
                    Err(e) => {
                        tracing::error!("FPP Connect listener: {e}");
                        return;
                    }
                };
                if let Err(e) = server::serve(listener, state, async move {
                    let _ = shutdown.await;
                })
                .await
                {
                    tracing::error!("FPP Connect HTTP stopped: {e}");
                }
            });
        })
}

/// UDP 32320 shared with anything else that listens there (SO_REUSEPORT), joined to
/// 239.70.80.80 on the show interface and every other non-loopback interface.
fn ping_socket(show_iface: &str) -> std::io::Result<UdpSocket> {
    use socket2::{Domain, InterfaceIndexOrAddress, Protocol, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&SocketAddr::from((Ipv4Addr::UNSPECIFIED, info::PING_PORT)).into())?;
    let mut joined = 0;
    let mut names = crate::sys::net::interface_names();
    names.sort_by_key(|n| n != show_iface);
    for name in names {
        if crate::sys::net::is_loopback(&name) {
            continue;
        }
        if let Some(idx) = crate::sys::net::interface_index(&name)
            && s.join_multicast_v4_n(&info::PING_GROUP, &InterfaceIndexOrAddress::Index(idx))
                .is_ok()
        {
            joined += 1;
        }
    }
    if joined == 0 {
        tracing::warn!(
            "FPP Connect: joined 239.70.80.80 nowhere; only unicast and broadcast discover pings are heard"
        );
    }
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    s.set_broadcast(true)?;
    Ok(s.into())
}

/// The local IPv4 address the kernel would use to reach `peer` (no packet is sent).
fn local_addr_towards(peer: Ipv4Addr) -> Option<Ipv4Addr> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect((peer, info::PING_PORT)).ok()?;
    match s.local_addr().ok()? {
        SocketAddr::V4(a) if !a.ip().is_unspecified() => Some(*a.ip()),
        _ => None,
    }
}

/// The broadcast address of the interface that holds `local`, if it has one.
fn broadcast_of(local: Ipv4Addr) -> Option<Ipv4Addr> {
    crate::sys::net::interface_names()
        .iter()
        .filter(|n| !crate::sys::net::is_loopback(n))
        .filter_map(|n| crate::sys::net::ipv4_of(n))
        .find(|(a, _)| *a == local)
        .and_then(|(_, b)| b)
}

/// One discover ping to answer: who sent it, the address it carries, and the port.
#[derive(Debug, Clone, Copy)]
pub struct Discover {
    pub source: Ipv4Addr,
    pub carried: Ipv4Addr,
    pub port: u16,
}

/// Sends discover answers on its own thread, so the delay before each answer never holds
/// up the thread that heard the ping (on a remote, that one timestamps sync packets).
/// After a random delay under 5 ms: this unit's v3 ping to the broadcast address of the
/// interface toward the sender, then to the ping's own address and to its source
/// (`info::answer_targets`), as FPP answers.
pub fn spawn_answerer(
    unit: UnitInfo,
) -> std::io::Result<(std::sync::mpsc::SyncSender<Discover>, JoinHandle<()>)> {
    // A flood of pings fills this and the rest are dropped, not queued.
    let (tx, rx) = std::sync::mpsc::sync_channel::<Discover>(16);
    let t = std::thread::Builder::new()
        .name("pfx-ping-answer".into())
        .spawn(move || {
            background("pfx-ping-answer");
            while let Ok(d) = rx.recv() {
                let Some(local) = local_addr_towards(d.source) else {
                    continue;
                };
                let now = crate::sys::time::mono_ns();
                crate::sys::time::sleep_until(now + info::answer_delay_ns(now));
                let pkt = info::ping_v3(&unit, local);
                let targets =
                    info::answer_targets(d.source, d.carried, local, broadcast_of(local), d.port);
                if let Ok(out) = UdpSocket::bind((local, 0)) {
                    let _ = out.set_broadcast(true);
                    for t in targets {
                        if let Err(e) = out.send_to(&pkt, t) {
                            tracing::debug!("discover answer to {t}: {e}");
                        }
                    }
                }
            }
        })?;
    Ok((tx, t))
}

/// Hands each discover ping to the answerer (docs/fpp-connect.md 2.1).
fn answer_pings(sock: UdpSocket, unit: UnitInfo, stop: Arc<AtomicBool>) {
    let (tx, answerer) = match spawn_answerer(unit) {
        Ok(x) => x,
        Err(e) => {
            tracing::error!("FPP Connect: cannot start the discover answerer: {e}");
            return;
        }
    };
    let mut buf = [0u8; 1500];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let Ok(crate::sync::packet::Packet::Ping(p)) = crate::sync::packet::decode(&buf[..n])
        else {
            continue;
        };
        let SocketAddr::V4(from) = from else { continue };
        if p.discover {
            let _ = tx.try_send(Discover {
                source: *from.ip(),
                carried: p.ipv4,
                port: info::PING_PORT,
            });
        }
    }
    drop(tx);
    let _ = answerer.join();
}
