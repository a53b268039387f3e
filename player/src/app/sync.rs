//! MultiSync's shell: the sockets and threads around the pure `sync` core.
//!
//! - Every unit with a role binds 0.0.0.0:PORT (SO_REUSEPORT, as FPP does, so an FPP
//!   daemon or a second player on the host can listen too), joins FPP's group on the sync
//!   interface and answers discover pings with a v3 ping.
//! - A master's render thread sends open, start, sync and stop through `MasterSender`
//!   (non-blocking sends right after the frame's own), to the group, the broadcast address
//!   or a list of remotes; it pings once at start.
//! - A remote's receive thread (`pfx-sync`) timestamps each packet on arrival
//!   (CLOCK_MONOTONIC: the only clock a remote may use; the master's is another), runs
//!   `follow`, and publishes the master's timeline to the render thread through a seqlock.
//!   What needs files (opening the master's sequence, building the engine) goes to a
//!   second thread (`pfx-sync-open`), so a slow disk never delays a packet's timestamp.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Context;
use socket2::{Domain, InterfaceIndexOrAddress, Protocol, SockAddr, Socket, Type};

use super::RunOptions;
use super::build::{build_engine_for, unit_id};
use crate::config::show::{Item, MasterLostThen, Show, SyncRole, SyncSettings, SyncTransport};
use crate::engine::frame_loop::{
    Announce, Control, Engine, ItemSource, Playing, RemoteLink, SyncLink, TELL_REMOTES_FRAMES,
};
use crate::sync::announce::Announcer;
use crate::sync::follow::{Do, Follow, Lost, Then};
use crate::sync::packet::{self, Action, FileType, Packet, Ping};
use crate::sync::shared::{Published, Status, Timeline};
use crate::sys::time::mono_ns;

/// How long the receive thread waits for a packet before it checks for a lost master
/// and for shutdown.
const RECV_TIMEOUT: Duration = Duration::from_millis(100);

/// The sync threads; dropping this stops them.
pub struct SyncService {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    pub status: Arc<Status>,
}

impl Drop for SyncService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// What `prepare` makes before the render thread starts: the loop's link, and what
/// `start` needs once the loop's control channel exists.
pub struct Prepared {
    settings: SyncSettings,
    listen: Socket,
    ping: Ping,
    /// Who this unit is, for discover answers (the same identity as `ping`).
    unit: crate::fppconnect::info::UnitInfo,
    timeline: Arc<Timeline>,
    pub status: Arc<Status>,
}

/// FPP's ping view of this unit: the same identity FPP Connect gives xLights (host name,
/// version, the outputs' zero-based channel ranges), with the sync role as its mode.
fn our_unit(show: &Show) -> crate::fppconnect::info::UnitInfo {
    crate::fppconnect::unit_info(show, &unit_id(show), env!("CARGO_PKG_VERSION"))
}

fn our_ping(show: &Show, _s: &SyncSettings, ip: Ipv4Addr) -> Ping {
    crate::fppconnect::info::ping(&our_unit(show), ip)
}

/// Opens the sync sockets and makes the render loop's link. Errors name the setting.
pub fn prepare(show: &Show, s: &SyncSettings) -> anyhow::Result<(Prepared, SyncLink)> {
    let ifindex = crate::sys::net::interface_index(&s.interface).with_context(|| {
        format!(
            "sync.interface: no interface `{}`; name the interface the other units are on",
            s.interface
        )
    })?;
    let addrs = crate::sys::net::ipv4_of(&s.interface);
    let ip = addrs.map_or(Ipv4Addr::UNSPECIFIED, |a| a.0);
    let listen = open_listen(s.port, ifindex)
        .with_context(|| format!("sync: cannot listen on UDP port {}", s.port))?;
    let status = Arc::new(Status::default());
    status.set_text(|t| t.state = "idle".into());
    let timeline = Arc::new(Timeline::default());
    let dests = destinations(s, addrs.and_then(|a| a.1));
    let ping = our_ping(show, s, ip);
    let link = match s.role {
        SyncRole::Master => {
            let m = open_master(s, status.clone())?;
            // The master announces itself once at start.
            let p = packet::encode_ping_v3(&ping);
            for d in &dests {
                let _ = m.sock.send_to(&p, d);
            }
            SyncLink::Master(Box::new(m))
        }
        SyncRole::Remote => {
            SyncLink::Remote(Box::new(RemoteLink::new(timeline.clone(), status.clone())))
        }
        SyncRole::Standalone => SyncLink::Standalone,
    };
    Ok((
        Prepared {
            settings: s.clone(),
            listen,
            ping,
            unit: our_unit(show),
            timeline,
            status,
        },
        link,
    ))
}

/// Where a master's packets go.
fn destinations(s: &SyncSettings, broadcast: Option<Ipv4Addr>) -> Vec<SockAddr> {
    match s.transport {
        SyncTransport::Multicast => vec![SocketAddrV4::new(packet::GROUP, s.port).into()],
        SyncTransport::Broadcast => {
            let b = broadcast.unwrap_or(Ipv4Addr::BROADCAST);
            vec![SocketAddrV4::new(b, s.port).into()]
        }
        SyncTransport::Unicast => s
            .remotes
            .iter()
            .map(|r| SocketAddrV4::new(*r, s.port).into())
            .collect(),
    }
}

/// A master's sender for the render loop (`SyncLink::Master`), its socket open.
pub fn open_master(s: &SyncSettings, status: Arc<Status>) -> anyhow::Result<MasterSender> {
    let ifindex = crate::sys::net::interface_index(&s.interface)
        .with_context(|| format!("sync.interface: no interface `{}`", s.interface))?;
    let addrs = crate::sys::net::ipv4_of(&s.interface);
    let broadcast = addrs.and_then(|a| a.1);
    let sock = open_send(s, ifindex, broadcast.is_none(), addrs.map(|a| a.0))
        .with_context(|| format!("sync: cannot open the send socket on {}", s.interface))?;
    Ok(MasterSender::new(sock, destinations(s, broadcast), status))
}

fn open_listen(port: u16, ifindex: u32) -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.bind(&SocketAddr::from(([0, 0, 0, 0], port)).into())?;
    if let Err(e) = s.join_multicast_v4_n(&packet::GROUP, &InterfaceIndexOrAddress::Index(ifindex))
    {
        // Unicast and broadcast still arrive; say why multicast will not.
        tracing::warn!(
            "sync: cannot join {} on interface #{ifindex}: {e}",
            packet::GROUP
        );
    }
    s.set_read_timeout(Some(RECV_TIMEOUT))?;
    let on: libc::c_int = 1;
    use std::os::fd::AsRawFd;
    // SAFETY: setsockopt(2) reads `on` (an int) for SO_TIMESTAMPNS.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        // Without it a stop is timed from when the thread read it.
        tracing::warn!(
            "sync: no kernel receive stamps ({}); a busy unit may take a master's blackout a frame late",
            std::io::Error::last_os_error()
        );
    }
    Ok(s)
}

/// `bind_device`: for broadcast to 255.255.255.255 (an interface without a broadcast
/// address), which would otherwise leave by the default route.
/// `source`: the interface's address, so the packets carry it (a remote shows it as its
/// master, and answers pings there) even where the kernel would pick none (loopback).
fn open_send(
    s: &SyncSettings,
    ifindex: u32,
    bind_device: bool,
    source: Option<Ipv4Addr>,
) -> std::io::Result<Socket> {
    let sock = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    // The render thread sends: a full buffer drops the packet, it never waits.
    sock.set_nonblocking(true)?;
    match s.transport {
        SyncTransport::Multicast => {
            use std::os::fd::AsRawFd;
            crate::sys::net::set_multicast_ifindex(sock.as_raw_fd(), ifindex)?;
            sock.set_multicast_ttl_v4(1)?;
            // A remote on the same host (a test, a second player) hears it too.
            sock.set_multicast_loop_v4(true)?;
        }
        SyncTransport::Broadcast => {
            sock.set_broadcast(true)?;
            if bind_device && let Err(e) = sock.bind_device(Some(s.interface.as_bytes())) {
                tracing::warn!(
                    "sync: cannot bind the broadcast socket to {} ({e}); broadcasts follow the routing table",
                    s.interface
                );
            }
        }
        SyncTransport::Unicast => {}
    }
    let ip = source.unwrap_or(Ipv4Addr::UNSPECIFIED);
    sock.bind(&SocketAddr::from((ip, 0)).into())?;
    Ok(sock)
}

/// The master's side on the render thread: the cadence from `Announcer`, the packets
/// into a fixed buffer, non-blocking sends. Allocates only when an item begins whose
/// name is longer than any before.
pub struct MasterSender {
    sock: Socket,
    dests: Vec<SockAddr>,
    announcer: Announcer,
    /// The name of the item announced last (the one a stop is for).
    name: String,
    buf: [u8; packet::MAX_SYNC_LEN],
    status: Arc<Status>,
}

impl MasterSender {
    fn new(sock: Socket, dests: Vec<SockAddr>, status: Arc<Status>) -> MasterSender {
        MasterSender {
            sock,
            dests,
            announcer: Announcer::default(),
            name: String::with_capacity(256),
            buf: [0; packet::MAX_SYNC_LEN],
            status,
        }
    }

    fn send(&mut self, action: Action, frame: u32, seconds: f32) {
        let s = packet::Sync {
            action,
            file_type: FileType::Sequence,
            frame,
            seconds,
            name: &self.name,
        };
        let Ok(n) = packet::encode_sync(&mut self.buf, &s) else {
            self.status.send_errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        for d in &self.dests {
            match self.sock.send_to(&self.buf[..n], d) {
                Ok(_) => self.status.sent.fetch_add(1, Ordering::Relaxed),
                Err(_) => self.status.send_errors.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
}

impl MasterSender {
    fn send_blank(&mut self) {
        let b = packet::encode_blank();
        for d in &self.dests {
            match self.sock.send_to(&b, d) {
                Ok(_) => self.status.sent.fetch_add(1, Ordering::Relaxed),
                Err(_) => self.status.send_errors.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
}

impl Announce for MasterSender {
    fn frame_sent(&mut self, playing: Option<Playing<'_>>) {
        let Some(p) = playing else {
            // Also a blackout on the master (the loop says nothing plays): the stop is
            // what makes its remotes black (they go idle, black until the next start),
            // and FPP remotes blank their outputs on the blank packet.
            if self.announcer.idle() {
                self.send(Action::Stop, 0, 0.0);
                self.send_blank();
            }
            return;
        };
        let out = self.announcer.frame(p.show, p.item_start_ns, p.frame);
        if out.stop_previous {
            self.send(Action::Stop, 0, 0.0);
        }
        if out.open {
            self.name.clear();
            self.name.push_str(p.name);
            self.send(Action::Open, 0, 0.0);
        }
        if out.start {
            self.send(Action::Start, 0, 0.0);
        }
        if out.sync {
            // The position when the packet leaves, so a remote's arrival time maps onto
            // the master's timeline with the network delay alone.
            self.send(Action::Sync, p.frame, p.pos_ns as f32 / 1e9);
        }
    }
}

impl Prepared {
    /// Starts the threads: the receiver (pings for every role; the master's timeline for a
    /// remote) and, for a remote, the one that opens the master's sequences and hands
    /// them to the render loop through `control`.
    pub fn start(
        self,
        show: &Show,
        opts: &RunOptions,
        control: Sender<Control>,
    ) -> anyhow::Result<SyncService> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        // Each action with the moment its packet was read (the receiver's clock right after
        // recv), so a stop is timed from its packet, not from when the opener woke.
        let (tx, rx) = channel::<(Do, u64)>();
        if self.settings.role == SyncRole::Remote {
            let (show, opts, dir) = (show.clone(), opts.clone(), self.settings.sequences.clone());
            let timeline = self.timeline.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("pfx-sync-open".into())
                    .spawn(move || opener(rx, &show, &opts, &dir, control, &timeline))
                    .context("cannot start the sync opener thread")?,
            );
        }
        let status = self.status.clone();
        let stop2 = stop.clone();
        threads.push(
            std::thread::Builder::new()
                .name("pfx-sync".into())
                .spawn(move || receiver(self, tx, stop2))
                .context("cannot start the sync thread")?,
        );
        Ok(SyncService {
            stop,
            threads,
            status,
        })
    }
}

/// The receiver thread: pings for every role; for a remote, the master's sync packets
/// into `follow`, its actions to the opener and its timeline to the render thread.
fn receiver(p: Prepared, actions: Sender<(Do, u64)>, stop: Arc<AtomicBool>) {
    let mut r = Receiving::new(p);
    let mut buf = [0u8; 1500];
    while !stop.load(Ordering::Relaxed) {
        let got = recv_stamped(&r.p.listen, &mut buf);
        let now = mono_ns();
        // When the packet arrived: the kernel's stamp, so a thread that woke late (a busy
        // unit) does not move a stop's frame (`stop_at`); the estimator keeps `now`.
        let mut heard = now;
        let mut act = None;
        match got {
            Ok((n, from, arrival)) => {
                heard = arrival.unwrap_or(now);
                act = r.datagram(&buf[..n], from, now);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => {
                tracing::warn!("sync: receive failed: {e}");
                std::thread::sleep(RECV_TIMEOUT);
            }
        }
        if r.p.settings.role != SyncRole::Remote {
            continue;
        }
        r.follow_on(act, now, heard, &actions);
    }
}

/// What the receiver thread keeps between datagrams.
struct Receiving {
    p: Prepared,
    follow: Follow,
    /// Answers go out from their own thread after FPP's random delay; this one keeps
    /// timestamping packets meanwhile.
    answerer: Option<(
        std::sync::mpsc::SyncSender<crate::fppconnect::Discover>,
        JoinHandle<()>,
    )>,
    warned_other_master: bool,
    published_gen: u64,
}

impl Receiving {
    fn new(p: Prepared) -> Receiving {
        let s = &p.settings;
        let follow = Follow::new(
            Lost {
                after_ns: (s.lost_after_s * 1e9) as u64,
                then: match s.lost_then {
                    MasterLostThen::Stop => Then::Stop,
                    MasterLostThen::Continue => Then::Continue,
                },
            },
            s.offset_ms,
        );
        let unit = p.unit.clone();
        let answerer = match crate::fppconnect::spawn_answerer(unit) {
            Ok((tx, t)) => Some((tx, t)),
            Err(e) => {
                tracing::warn!(
                    "sync: cannot start the discover answerer, pings go unanswered: {e}"
                );
                None
            }
        };
        Receiving {
            p,
            follow,
            answerer,
            warned_other_master: false,
            published_gen: u64::MAX,
        }
    }

    /// One datagram from `from`, read at `now`: a remote's follow action, if the packet
    /// makes one.
    fn datagram(&mut self, data: &[u8], from: Option<SocketAddrV4>, now: u64) -> Option<Do> {
        let (p, s) = (&self.p, &self.p.settings);
        match packet::decode(data) {
            Err(e) => {
                p.status.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!("sync: dropped a datagram from {from:?}: {e}");
            }
            Ok(Packet::Ping(ping)) => {
                let ours = from.is_some_and(|f| *f.ip() == p.ping.ipv4)
                    || ping.hostname == p.ping.hostname;
                if ping.discover
                    && !ours
                    && let Some(f) = from
                    && let Some((tx, _)) = &self.answerer
                {
                    let _ = tx.try_send(crate::fppconnect::Discover {
                        source: *f.ip(),
                        carried: ping.ipv4,
                        port: s.port,
                    });
                }
            }
            Ok(Packet::Sync(sync)) if s.role == SyncRole::Remote => {
                p.status.received.fetch_add(1, Ordering::Relaxed);
                p.status.last_packet_ns.store(now, Ordering::Relaxed);
                let act = self.follow.packet(now, &sync);
                let master = from.map(|f| f.ip().to_string());
                p.status.set_text(|t| {
                    if t.master != master {
                        t.master = master;
                    }
                });
                return act;
            }
            Ok(Packet::Sync(_)) => {
                let from_us = from.is_some_and(|f| *f.ip() == p.ping.ipv4);
                if s.role == SyncRole::Master && !from_us && !self.warned_other_master {
                    self.warned_other_master = true;
                    tracing::warn!(
                        "sync: another master sends on port {} ({from:?}); remotes will follow both",
                        s.port
                    );
                }
            }
            Ok(_) => {}
        }
        None
    }

    /// A remote after each receive: the follow state's action (the packet's, else the
    /// clock's) to the opener, stamped `heard`; the timeline to the render thread; the
    /// status for `/profile`.
    fn follow_on(&mut self, act: Option<Do>, now: u64, heard: u64, actions: &Sender<(Do, u64)>) {
        let (p, follow) = (&self.p, &mut self.follow);
        let act = act.or_else(|| follow.tick(now));
        if let Some(a) = act {
            if a == Do::Stop {
                tracing::info!("sync: stopped with the master ({})", follow.state.name());
            }
            let _ = actions.send((a, heard));
        }
        let est = follow.estimator.estimate();
        if est.is_some() || follow.generation != self.published_gen {
            p.timeline.publish(follow.generation, est);
            self.published_gen = follow.generation;
        }
        if let Some(e) = est {
            p.status.jitter_ns.store(e.jitter_ns, Ordering::Relaxed);
        }
        let (state, seq) = (
            follow.state.name(),
            follow.state.sequence().map(str::to_string),
        );
        p.status.set_text(|t| {
            if t.state != state {
                t.state = state.to_string();
            }
            if t.sequence != seq {
                t.sequence = seq;
            }
        });
    }
}

/// One datagram, its sender, and when it arrived on CLOCK_MONOTONIC: the kernel's receive
/// stamp (SO_TIMESTAMPNS, on CLOCK_REALTIME) carried back by how long ago it was; None
/// without a stamp, or when the wall clock stepped in between (more than a second ago, or
/// in the future).
fn recv_stamped(
    sock: &Socket,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<SocketAddrV4>, Option<u64>)> {
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero is a valid sockaddr_in and msghdr.
    let mut addr: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // u64s: aligned for cmsghdr; room for one timespec message and more.
    let mut control = [0u64; 16];
    // SAFETY: as above.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut addr as *mut libc::sockaddr_in).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: every pointer in `msg` points at a live local of the length it says.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let from = (addr.sin_family == libc::AF_INET as libc::sa_family_t).then(|| {
        SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr)),
            u16::from_be(addr.sin_port),
        )
    });
    let mut stamp: Option<libc::timespec> = None;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within
    // msg_controllen; the timespec is read unaligned from the message's data.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                stamp = Some(std::ptr::read_unaligned(libc::CMSG_DATA(c).cast()));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    let arrival = stamp.and_then(|ts| {
        let at = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
        let real = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_nanos() as i128;
        let mono = mono_ns();
        let ago = real - at;
        (0..1_000_000_000).contains(&ago).then(|| mono - ago as u64)
    });
    Ok((n as usize, from, arrival))
}

/// The master's name for a file, resolved under `dir`: its base name only, so a master
/// cannot point a remote outside the folder.
pub fn resolve(dir: &Path, name: &str) -> Option<PathBuf> {
    let base = Path::new(name).file_name()?;
    let p = dir.join(base);
    p.is_file().then_some(p)
}

/// Readies a freshly opened sequence for joining the master mid-way: the decoder starts
/// a few frames ahead of where the master is, and the engine is handed over when the
/// master reaches that frame, so the first frame the remote plays is decoded (not the
/// decode-ahead's frame 0 region, which would go out late for a second).
fn cue(engine: &mut Engine, timeline: &Timeline) {
    const LEAD_FRAMES: i64 = 4;
    let Some(ItemSource::Fseq {
        prefetch,
        step_ms,
        frames,
        ..
    }) = engine.items.first_mut()
    else {
        return;
    };
    let Some(Published {
        estimate: Some(e), ..
    }) = timeline.read()
    else {
        return;
    };
    let step = i64::from((*step_ms).max(1)) * 1_000_000;
    let now = mono_ns() as i64;
    let target = (now - e.base_ns).div_euclid(step) + LEAD_FRAMES;
    if target <= LEAD_FRAMES || target >= i64::from(*frames) {
        return;
    }
    prefetch.wait_for(target as u32, Duration::from_secs(2));
    let at = e.base_ns + target * step;
    if at > mono_ns() as i64 {
        crate::sys::time::sleep_until(at as u64);
    }
}

/// When a stop heard at `heard_ns` takes effect: at the first frame boundary from one and
/// a half frames on. The master's stop leaves right after its frame N, and a blacked-out
/// master goes black at N + `TELL_REMOTES_FRAMES` (2): this unit's frame N+1 comes about
/// one frame after the stop was heard and its N+2 about two, so the half frame either side
/// is the margin for this unit's tick being late (it must not go black a frame early) and
/// for the stop being heard late (nor a frame late). Pure.
pub fn stop_at(heard_ns: u64, period_ns: u64) -> u64 {
    heard_ns + period_ns * (2 * u64::from(TELL_REMOTES_FRAMES) - 1) / 2
}

fn opener(
    rx: Receiver<(Do, u64)>,
    show: &Show,
    opts: &RunOptions,
    dir: &Path,
    control: Sender<Control>,
    timeline: &Timeline,
) {
    let mut prepared: Option<(String, Engine)> = None;
    let mut missing: Option<String> = None;
    let build = |name: &str, missing: &mut Option<String>| -> Option<Engine> {
        let Some(path) = resolve(dir, name) else {
            if missing.as_deref() != Some(name) {
                tracing::warn!(
                    "sync: the master plays `{name}`, but {} has no such file; copy the sequence there (black until then)",
                    dir.display()
                );
                *missing = Some(name.to_string());
            }
            return None;
        };
        match build_engine_for(show, &[Item::Fseq(path.clone())], false, opts) {
            Ok(e) => Some(e),
            Err(e) => {
                tracing::error!("sync: cannot open {}: {e:#}", path.display());
                None
            }
        }
    };
    let black = || build_engine_for(show, &[], false, opts).ok();
    let period_ns = 1_000_000_000 / u64::from(show.config.fps.max(1));
    // A black show built ahead: a stop hands it over at once (building one opens the
    // outputs' sockets, which a busy unit may take longer than a frame to do).
    let mut spare_black = black();
    while let Ok((a, heard_ns)) = rx.recv() {
        let engine = match a {
            Do::Prepare(name) => {
                if prepared.as_ref().is_none_or(|(n, _)| *n != name) {
                    prepared = build(&name, &mut missing).map(|e| (name, e));
                }
                continue;
            }
            Do::Play(name) => match prepared.take() {
                Some((n, e)) if n == name => Some(e),
                _ => build(&name, &mut missing),
            }
            .or_else(black),
            Do::Stop => {
                let ready = spare_black.take().or_else(black);
                if let Some(e) = ready
                    && control
                        .send(Control::At(Box::new(e), stop_at(heard_ns, period_ns)))
                        .is_err()
                {
                    return;
                }
                spare_black = black();
                continue;
            }
        };
        if let Some(mut e) = engine {
            cue(&mut e, timeline);
            if control.send(Control::Reload(Box::new(e))).is_err() {
                return;
            }
        }
    }
}
