use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use socket2::Socket;
use uuid::Uuid;

use super::admit::{Admit, Rotation, Verdict, truesize};
use super::counters::OutputCounters;
use super::halves::{self, Fill, FrameResult, HalfTimes, Halves, Part, Render};
use super::ratelimit::RateLimit;
use super::send::{SendOutcome, Sender};
use super::socket::{SocketOptions, open_udp, set_dont_fragment, set_multicast_ifindex};
use super::split::{SPLIT_MIN_DATAGRAMS, Splitter};
use crate::config::Protocol;
use crate::config::show::ResolvedOutput;
use crate::geometry::PoleMap;
use crate::sys::net::{interface_index, send_queue_bytes};
use crate::sys::time::mono_ns;
use crate::wire::{Datagrams, bigpacket, ddp, sacn};

/// After the interface went away, look it up again at most this often.
const REBIND_EVERY_NS: u64 = 500_000_000;

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "output {output}: interface `{interface}` does not exist (interfaces here: {available}); set `interface:` in the show config"
    )]
    NoInterface {
        output: String,
        interface: String,
        available: String,
    },
    #[error("output {output}: destination {dest} is IPv6; pfx sends over IPv4 only")]
    Ipv6 { output: String, dest: SocketAddr },
    #[error("output {output}: cannot set up the socket: {error}")]
    Socket {
        output: String,
        error: std::io::Error,
    },
}

#[derive(Debug, Clone)]
pub struct OutputOptions {
    pub socket: SocketOptions,
    /// sACN component id, stable per unit.
    pub cid: Uuid,
    /// sACN source name.
    pub source_name: String,
}

enum Encoder {
    Sacn(Box<sacn::Encoder>),
    Ddp(ddp::Encoder),
    BigPacket(bigpacket::Encoder),
}

pub struct Output {
    pub name: String,
    pub protocol: Protocol,
    pub destination: SocketAddrV4,
    map: PoleMap,
    encoder: Encoder,
    socket: Socket,
    sender: Sender,
    /// The helper thread of an output with many datagrams per frame.
    helper: Helper,
    batch: Datagrams,
    pixels: Vec<u8>,
    counters: Arc<OutputCounters>,
    dontwait: bool,
    interface: String,
    /// The interface went away (ENODEV, ENETUNREACH, ...): re-resolve it in `maintain`.
    lost_interface: bool,
    last_rebind_ns: Option<u64>,
    log: RateLimit,
    /// Whole frames at the link's rate (None: every frame is sent as far as the socket
    /// takes it, the measured baseline and the blocking one).
    admit: Option<Admit>,
    /// Where the next frame of a single batch starts, after one was cut short.
    rotation: Rotation,
    /// The last single-batch frame went whole.
    last_whole: bool,
    /// Datagrams at the end of a frame's batch that stay last: the sACN sync packet,
    /// DDP's PUSH packet.
    tail: usize,
}

/// What `gate` decided for the frame due now.
enum Gate {
    /// Send it; with the rule in force, the bytes queued below the socket just before.
    Send(Option<u64>),
    /// Skip it whole (counted).
    Skip,
}

/// How an output uses a second thread.
enum Helper {
    /// A small output: the render thread does it all.
    None,
    /// The helper sends the second half of each frame's batch (a large DDP or bigPacket
    /// output: its encoding does not split by universe).
    Send(Box<Splitter>),
    /// A large sACN output: each half of the universes is rendered, encoded and sent on
    /// its own thread (see `halves`).
    Halves(Box<Halves>),
}

/// Errors that mean "the interface is gone or down", after which the output re-resolves the
/// interface by name and resumes by itself.
fn is_interface_error(e: i32) -> bool {
    matches!(
        e,
        libc::ENODEV | libc::ENETUNREACH | libc::ENETDOWN | libc::EADDRNOTAVAIL | libc::ENXIO
    )
}

/// Room for about two frames of this pole in the socket. Every byte the socket may hold is
/// a byte that can sit in a stalled queue and reach the pole late: with the kernel's
/// default (~208 KB) a stalled output delivered frames seconds old when the stall lifted
/// (testbed, docs/perf/testbed.md). The kernel doubles the value asked for and counts each
/// datagram's buffer overhead (~800 bytes) against it, so asking for one frame's worth
/// gives room for two; it also enforces its own minimum (about 4.6 KB).
pub fn default_send_buffer(channels: usize, datagrams: usize) -> usize {
    (channels + datagrams * 800).max(2304)
}

/// The output's encoder for its profile's protocol, and the shape of its frames.
fn encoder_for(
    o: &ResolvedOutput,
    opts: &OutputOptions,
    destination: SocketAddrV4,
) -> (Encoder, crate::wire::FrameShape) {
    let p = &o.profile;
    let channels = p.channels();
    match p.protocol {
        Protocol::Sacn => {
            let so = p.sacn_options();
            let dest = if destination.ip().is_multicast() {
                sacn::Dest::Multicast {
                    port: destination.port(),
                }
            } else {
                sacn::Dest::Unicast(destination)
            };
            let enc = sacn::Encoder::new(
                sacn::Config {
                    cid: opts.cid,
                    source_name: format!("{} {}", opts.source_name, o.name),
                    priority: so.priority,
                    first_universe: so.first_universe,
                    universe_size: so.universe_size,
                    sync_universe: so.sync_universe,
                    dest,
                },
                channels,
            );
            let shape = enc.frame_shape();
            (Encoder::Sacn(Box::new(enc)), shape)
        }
        Protocol::Ddp => {
            let d = p.ddp_options();
            (
                Encoder::Ddp(ddp::Encoder::new(d.data_type, d.destination_id)),
                ddp::frame_shape(channels),
            )
        }
        Protocol::Bigpacket => (
            Encoder::BigPacket(bigpacket::Encoder::new(
                p.bigpacket_options().pole_id,
                p.pixel_format == crate::config::PixelFormat::Rgbw8,
            )),
            bigpacket::frame_shape(channels),
        ),
    }
}

/// Whether the output's datagrams go with DF set. Only sACN and DDP, and only when every
/// datagram fits the interface's MTU: a DF datagram larger than the MTU is refused
/// (EMSGSIZE), where without DF the kernel fragments it. bigPacket's datagrams are larger
/// than the MTU by design (see `set_dont_fragment`).
fn dont_fragment(
    o: &ResolvedOutput,
    opts: &OutputOptions,
    shape: &crate::wire::FrameShape,
    mtu: usize,
) -> bool {
    if !matches!(o.profile.protocol, Protocol::Sacn | Protocol::Ddp) {
        return false;
    }
    if shape.largest_datagram() + crate::wire::IPV4_UDP_HEADERS <= mtu {
        return true;
    }
    tracing::info!(
        output = %o.name,
        interface = %opts.socket.interface,
        mtu,
        "datagrams up to {} bytes do not fit the MTU; sent fragmentable (no DF)",
        shape.largest_datagram()
    );
    false
}

/// The helper thread a large output gets: halves for sACN, a send helper for the others
/// (none when it cannot start: the render thread then does it all).
fn helper_for(
    o: &ResolvedOutput,
    opts: &OutputOptions,
    encoder: &Encoder,
    shape: &crate::wire::FrameShape,
) -> Helper {
    let p = &o.profile;
    let per_frame = shape.per_frame();
    // The blocking baseline stays single-threaded: it measures a naive player.
    let halves = match encoder {
        Encoder::Sacn(e) if per_frame >= SPLIT_MIN_DATAGRAMS && !opts.socket.blocking => {
            halves::split(
                e.universes(),
                usize::from(e.config().universe_size),
                p.pixel_format.bytes_per_pixel(),
                p.channels(),
            )
            .map(|spans| spans.map(|s| Part::new(s, e.config(), shape.slot_len)))
        }
        _ => None,
    };
    let no_thread = |e: std::io::Error| {
        tracing::warn!(output = %o.name, "no helper thread ({e}); this output renders and sends from the render thread alone");
        Helper::None
    };
    if let Some(parts) = halves {
        Halves::new(parts).map_or_else(no_thread, |h| Helper::Halves(Box::new(h)))
    } else if per_frame >= SPLIT_MIN_DATAGRAMS && !opts.socket.blocking {
        Splitter::spawn(shape.slots).map_or_else(no_thread, |s| Helper::Send(Box::new(s)))
    } else {
        Helper::None
    }
}

/// How many datagrams at the end of a frame are not a universe's data: sACN's sync
/// packet, DDP's push.
fn tail_datagrams(encoder: &Encoder, protocol: Protocol) -> usize {
    match (encoder, protocol) {
        (Encoder::Sacn(e), _) => usize::from(e.config().sync_universe.is_some()),
        (_, Protocol::Ddp) => 1,
        _ => 0,
    }
}

/// The output's counters, one slot per data datagram (numbered by universe for sACN),
/// with the frame's size.
fn counters_for(
    encoder: &Encoder,
    shape: &crate::wire::FrameShape,
    tail: usize,
) -> Arc<OutputCounters> {
    let per_frame = shape.per_frame();
    let slot_base = match encoder {
        Encoder::Sacn(e) => u64::from(e.config().first_universe),
        _ => 0,
    };
    let counters = Arc::new(OutputCounters::with_slots(
        per_frame.saturating_sub(tail),
        slot_base,
    ));
    {
        use std::sync::atomic::Ordering::Relaxed;
        let bytes: usize = shape.datagrams.iter().sum();
        counters.frame_bytes.store(bytes as u64, Relaxed);
        counters.frame_datagrams.store(per_frame as u64, Relaxed);
    }
    counters
}

impl Output {
    pub fn open(o: &ResolvedOutput, opts: &OutputOptions) -> Result<Output, OutputError> {
        let destination = match o.destination {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => {
                return Err(OutputError::Ipv6 {
                    output: o.name.clone(),
                    dest: o.destination,
                });
            }
        };
        let Some(ifindex) = interface_index(&opts.socket.interface) else {
            return Err(OutputError::NoInterface {
                output: o.name.clone(),
                interface: opts.socket.interface.clone(),
                available: crate::sys::net::interface_names().join(", "),
            });
        };
        let sock_err = |error| OutputError::Socket {
            output: o.name.clone(),
            error,
        };
        let p = &o.profile;
        let channels = p.channels();
        // The protocol says how big its datagrams are; everything below is sized from that.
        let (encoder, shape) = encoder_for(o, opts, destination);
        // Discovery pages go out beside a frame; count the frame's datagrams only.
        let per_frame = shape.per_frame();
        let slots = shape.slots;
        let mut sock_opts = opts.socket.clone();
        if sock_opts.send_buffer.is_none() {
            sock_opts.send_buffer = Some(default_send_buffer(channels, per_frame));
        }
        let socket = open_udp(&sock_opts).map_err(sock_err)?;
        set_multicast_ifindex(&socket, ifindex).map_err(sock_err)?;
        let mtu = crate::sys::net::mtu(&opts.socket.interface).unwrap_or(1500);
        if dont_fragment(o, opts, &shape, mtu) {
            set_dont_fragment(&socket).map_err(sock_err)?;
        }
        let helper = helper_for(o, opts, &encoder, &shape);
        // What a frame costs in the socket's accounting, for the admission rule.
        let costs: Vec<u64> = shape.datagrams.iter().map(|&l| truesize(l, mtu)).collect();
        let admit = if opts.socket.blocking || opts.socket.send_every_frame {
            None
        } else {
            let sndbuf = crate::sys::net::send_buffer_bytes(socket.as_raw_fd()).unwrap_or(0);
            // 40 fps until the loop says (`set_frame_period`).
            Some(Admit::new(&costs, sndbuf, 25_000_000))
        };
        let tail = tail_datagrams(&encoder, p.protocol);
        let counters = counters_for(&encoder, &shape, tail);
        // In halves the parts hold the frame's datagrams; the output's own batch carries
        // only the sync packet and the discovery pages.
        let batch = match &helper {
            Helper::Halves(_) => crate::wire::Datagrams::new(
                per_frame.div_ceil(sacn::DISCOVERY_UNI_PER_PAGE).max(1),
                shape.slot_len,
            ),
            _ => shape.batch(),
        };
        Ok(Output {
            name: o.name.clone(),
            protocol: p.protocol,
            destination,
            map: PoleMap {
                start: o.start,
                pixels: p.pixels as usize,
                format: p.pixel_format,
                order: p.color_order,
            },
            encoder,
            socket,
            sender: Sender::new(slots),
            helper,
            batch,
            pixels: vec![0; channels],
            counters,
            dontwait: !opts.socket.blocking,
            interface: opts.socket.interface.clone(),
            lost_interface: false,
            last_rebind_ns: None,
            log: RateLimit::new(Duration::from_secs(5)),
            admit,
            rotation: Rotation::default(),
            last_whole: true,
            tail,
        })
    }

    /// The show's frame period: admission keeps each frame within two of them.
    pub fn set_frame_period(&mut self, period_ns: u64) {
        if let Some(a) = &mut self.admit {
            a.set_period(period_ns);
        }
    }

    /// Whether the frame due now goes out (see `admit`); a skip is counted here. A queue
    /// that cannot be read sends, as before there was a rule.
    fn gate(&mut self) -> Gate {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(a) = self.admit.as_mut() else {
            return Gate::Send(None);
        };
        // The clock on both sides of the reading: a reading interrupted between the ioctl
        // and the clock must not measure a rate (`admit::READ_MAX_NS`).
        let t0 = mono_ns();
        let Ok(q) = send_queue_bytes(self.socket.as_raw_fd()) else {
            return Gate::Send(None);
        };
        let t1 = mono_ns();
        match a.decide_read(q, t1, t1 - t0, super::queue_keeps_newest()) {
            Verdict::Send => Gate::Send(Some(q)),
            Verdict::SkipNoRoom | Verdict::SkipBacklog => {
                self.counters.frames_skipped.fetch_add(1, Relaxed);
                Gate::Skip
            }
        }
    }

    /// After a frame's send, so the rule learns what the link drained.
    fn after_frame(&mut self, before: Option<u64>, whole: bool) {
        if let (Some(a), Some(before)) = (&mut self.admit, before) {
            let t0 = mono_ns();
            if let Ok(q) = send_queue_bytes(self.socket.as_raw_fd()) {
                let t1 = mono_ns();
                a.sent_read(before, q, t1, t1 - t0, whole);
            }
        }
    }

    pub fn map(&self) -> &PoleMap {
        &self.map
    }

    /// Geometry for this pole: its channels of the frame, in its colour order, scaled.
    pub fn map_from(&mut self, channels: &[u8], brightness: &crate::geometry::Brightness) {
        crate::geometry::map_pole(channels, &self.map, brightness, &mut self.pixels);
    }

    /// The pole's wire pixels for this frame; geometry writes them.
    pub fn pixels_mut(&mut self) -> &mut [u8] {
        &mut self.pixels
    }

    pub fn pixels(&self) -> &[u8] {
        &self.pixels
    }

    pub fn counters(&self) -> Arc<OutputCounters> {
        self.counters.clone()
    }

    /// CPU time the output's helper thread has used so far, or None when this output
    /// renders and sends from the calling thread alone.
    pub fn send_helper_cpu_ns(&self) -> Option<u64> {
        match &self.helper {
            Helper::None => None,
            Helper::Send(s) => Some(s.cpu_ns()),
            Helper::Halves(h) => Some(h.cpu_ns()),
        }
    }

    /// The output renders its frames in two halves on two threads (`render_and_send`).
    pub fn renders_in_halves(&self) -> bool {
        matches!(self.helper, Helper::Halves(_))
    }

    /// The whole frame of an output that `renders_in_halves`: its channels (`channels`,
    /// `map().channels()` bytes from its start channel) filled from `fill`, geometry,
    /// encoding and send, one half on the render thread and one on the helper. Returns,
    /// per stage, the longer of the two halves' times. An output without halves only
    /// maps and sends here.
    pub fn render_and_send(
        &mut self,
        channels: &mut [u8],
        fill: Fill<'_>,
        brightness: &crate::geometry::Brightness,
    ) -> HalfTimes {
        if !self.renders_in_halves() {
            let map = PoleMap {
                start: 0,
                ..self.map.clone()
            };
            crate::geometry::map_pole(channels, &map, brightness, &mut self.pixels);
            self.send_frame(0);
            return HalfTimes::default();
        }
        let Gate::Send(before) = self.gate() else {
            return HalfTimes::default();
        };
        let map = self.map.clone();
        let render = Render {
            channels,
            fill,
            map: &map,
            brightness,
        };
        self.frame_in_halves(Some(render), before)
    }

    /// A frame of an output in halves, then its sync packet once both halves are out:
    /// only when every universe of the frame went (a receiver that waits for sync then
    /// never shows a torn frame; it shows the next whole one).
    fn frame_in_halves(&mut self, render: Option<Render<'_>>, before: Option<u64>) -> HalfTimes {
        let fd = self.socket.as_raw_fd();
        let Helper::Halves(h) = &mut self.helper else {
            return HalfTimes::default();
        };
        let FrameResult {
            mut outcome,
            times,
            error,
            datagrams,
        } = h.frame(fd, self.dontwait, render, &mut self.pixels);
        if let Some(e) = error {
            self.encode_failed(&e);
            return times;
        }
        self.batch.clear();
        if let Encoder::Sacn(e) = &mut self.encoder
            && outcome.errno.is_none()
            && outcome.sent == datagrams
            && e.encode_sync(&mut self.batch).is_ok()
            && !self.batch.is_empty()
        {
            outcome = outcome.merge(self.sender.send(fd, &self.batch, self.dontwait));
        }
        let of = datagrams + usize::from(self.tail > 0);
        if outcome.sent < of
            && let Helper::Halves(h) = &self.helper
        {
            for (offset, body, start, sent) in h.last_sends() {
                self.counters.count_partial(offset, body, start, sent);
            }
        }
        self.account(outcome, true, of);
        self.after_frame(before, outcome.sent == of);
        times
    }

    fn encode_failed(&mut self, e: &dyn std::fmt::Display) {
        use std::sync::atomic::Ordering::Relaxed;
        self.counters.frames_failed.fetch_add(1, Relaxed);
        if let Some(n) = self.log.check(mono_ns()) {
            tracing::error!(output = %self.name, suppressed = n, "cannot encode frame: {e}");
        }
    }

    /// Encodes the current pixels and sends them. Never blocks unless the output was
    /// opened in blocking mode.
    pub fn send_frame(&mut self, timestamp_us: u64) {
        let Gate::Send(before) = self.gate() else {
            return;
        };
        if self.renders_in_halves() {
            self.frame_in_halves(None, before);
            return;
        }
        self.batch.clear();
        let encoded = match &mut self.encoder {
            Encoder::Sacn(e) => e
                .encode(&self.pixels, &mut self.batch)
                .and_then(|()| e.encode_sync(&mut self.batch)),
            Encoder::Ddp(e) => e.encode(&self.pixels, self.destination, &mut self.batch),
            Encoder::BigPacket(e) => e.encode(
                &self.pixels,
                timestamp_us,
                0,
                self.destination,
                &mut self.batch,
            ),
        };
        if let Err(e) = encoded {
            self.encode_failed(&e);
            return;
        }
        self.flush(true);
        let whole = self.last_whole;
        self.after_frame(before, whole);
    }

    /// sACN universe discovery (E1.31 §8), every 10 s by the loop's background stage.
    pub fn send_discovery(&mut self) {
        if let Encoder::Sacn(e) = &self.encoder {
            self.batch.clear();
            if e.encode_discovery(&mut self.batch).is_ok() {
                self.flush(false);
            }
        }
    }

    /// Tells receivers the stream ends: sACN sends three stream-terminated packets per
    /// universe (E1.31 §6.7.1); bigPacket sends one frame with the END flag. Best effort,
    /// never blocks.
    pub fn terminate(&mut self) {
        if let Helper::Halves(h) = &mut self.helper {
            // The halves' encoders hold the universes' sequence numbers.
            h.terminate(self.socket.as_raw_fd(), &self.pixels);
            return;
        }
        match &mut self.encoder {
            Encoder::Sacn(e) => {
                for _ in 0..3 {
                    self.batch.clear();
                    if e.encode_terminate(&self.pixels, &mut self.batch).is_ok() {
                        let fd = self.socket.as_raw_fd();
                        self.sender.send(fd, &self.batch, true);
                    }
                }
            }
            Encoder::BigPacket(e) => {
                self.batch.clear();
                let now = crate::sys::time::unix_micros();
                if e.encode(
                    &self.pixels,
                    now,
                    bigpacket::FLAG_END,
                    self.destination,
                    &mut self.batch,
                )
                .is_ok()
                {
                    let fd = self.socket.as_raw_fd();
                    self.sender.send(fd, &self.batch, true);
                }
            }
            Encoder::Ddp(_) => {}
        }
    }

    /// Background upkeep: after the interface went away, look it up again by name (its
    /// index changes when it comes back) at most twice a second.
    pub fn maintain(&mut self, now_ns: u64) {
        if !self.lost_interface
            || self
                .last_rebind_ns
                .is_some_and(|t| now_ns.saturating_sub(t) < REBIND_EVERY_NS)
        {
            return;
        }
        self.last_rebind_ns = Some(now_ns);
        if let Some(idx) = interface_index(&self.interface)
            && set_multicast_ifindex(&self.socket, idx).is_ok()
        {
            self.lost_interface = false;
            tracing::info!(output = %self.name, interface = %self.interface, "interface back; output resumes");
        }
    }

    fn flush(&mut self, is_frame: bool) {
        let fd = self.socket.as_raw_fd();
        let n = self.batch.len();
        let outcome = match &mut self.helper {
            Helper::Send(split) if is_frame => {
                let o = split.send(fd, &self.batch, &mut self.sender, self.dontwait, self.tail);
                if o.sent < n {
                    for (offset, body, start, sent) in split.last_sends() {
                        self.counters.count_partial(offset, body, start, sent);
                    }
                }
                o
            }
            _ if is_frame => {
                // The universes (or DDP's data packets) start where the last cut frame
                // stopped; sync and PUSH stay last.
                let body = n.saturating_sub(self.tail);
                let start = self.rotation.start;
                let o = self
                    .sender
                    .send_rotated(fd, &self.batch, 0..n, body, start, self.dontwait);
                if o.sent < n {
                    self.counters.count_partial(0, body, start, o.sent);
                }
                self.rotation.after(body, o.sent);
                o
            }
            _ => self.sender.send(fd, &self.batch, self.dontwait),
        };
        if is_frame {
            self.last_whole = outcome.sent == n;
        }
        self.account(outcome, is_frame, n);
    }

    /// Counts what a send did (`of` datagrams were due) and logs a failure, rate-limited.
    fn account(&mut self, outcome: SendOutcome, is_frame: bool, of: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let SendOutcome { sent, bytes, errno } = outcome;
        let c = &self.counters;
        c.packets.fetch_add(sent as u64, Relaxed);
        c.bytes.fetch_add(bytes as u64, Relaxed);
        if is_frame {
            // Every frame due is one of these three.
            match sent {
                s if s >= of => &c.frames_sent,
                0 => &c.frames_skipped,
                _ => &c.frames_partial,
            }
            .fetch_add(1, Relaxed);
        }
        let Some(e) = errno else {
            return;
        };
        c.count_errno(e);
        let would_block = e == libc::EAGAIN || e == libc::EWOULDBLOCK || e == libc::ENOBUFS;
        if is_frame {
            if would_block {
                &c.frames_dropped
            } else {
                &c.frames_failed
            }
            .fetch_add(1, Relaxed);
        }
        if is_interface_error(e) {
            self.lost_interface = true;
        }
        if let Some(n) = self.log.check(mono_ns()) {
            let err = std::io::Error::from_raw_os_error(e);
            if would_block {
                tracing::warn!(output = %self.name, suppressed = n, sent, of, "send would block ({err}); dropped the rest of this frame");
            } else {
                tracing::error!(output = %self.name, suppressed = n, sent, of, "send failed: {err}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::DeviceProfile;

    fn open(protocol: &str, pixels: usize) -> Output {
        let profile = DeviceProfile::from_str(
            &format!(
                "name: t\nprotocol: {protocol}\npixels: {pixels}\npixel_format: rgb8\ncolor_order: rgb\ndestination: 127.0.0.1:9\n"
            ),
            Path::new("<test>"),
        )
        .expect("test profile");
        let resolved = ResolvedOutput {
            name: protocol.into(),
            destination: profile.destination,
            start: 0,
            profile,
        };
        let opts = OutputOptions {
            socket: SocketOptions {
                interface: "lo".into(),
                multicast_ttl: 0,
                multicast_loop: false,
                blocking: false,
                send_every_frame: false,
                send_buffer: None,
            },
            cid: Uuid::nil(),
            source_name: "test".into(),
        };
        Output::open(&resolved, &opts).expect("open output on lo")
    }

    fn mtu_discover(o: &Output) -> libc::c_int {
        let mut v: libc::c_int = -1;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: the pointers describe a live c_int and its length.
        let rc = unsafe {
            libc::getsockopt(
                o.socket.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
        v
    }

    #[test]
    fn df_is_set_on_sacn_and_ddp_sockets_and_not_on_bigpacket() {
        assert_eq!(mtu_discover(&open("sacn", 300)), libc::IP_PMTUDISC_PROBE);
        assert_eq!(mtu_discover(&open("ddp", 300)), libc::IP_PMTUDISC_PROBE);
        // bigPacket keeps the kernel's default, which fragments an oversize datagram.
        let big = mtu_discover(&open("bigpacket", 2000));
        assert_ne!(big, libc::IP_PMTUDISC_PROBE);
        assert_ne!(big, libc::IP_PMTUDISC_DO);
    }

    #[test]
    fn only_outputs_with_many_datagrams_get_a_send_helper() {
        // 127 and 128 universes of 170 pixels: just under and at the threshold.
        assert!(open("sacn", 127 * 170).send_helper_cpu_ns().is_none());
        assert!(open("sacn", 128 * 170).send_helper_cpu_ns().is_some());
        assert!(open("bigpacket", 2000).send_helper_cpu_ns().is_none());
    }
}
