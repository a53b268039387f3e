use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, Socket, Type};

#[derive(Debug, Clone)]
pub struct SocketOptions {
    /// Interface multicast leaves by (`IP_MULTICAST_IF`), by name.
    pub interface: String,
    pub multicast_ttl: u32,
    pub multicast_loop: bool,
    /// The measured baseline only: a blocking socket, as a naive player has.
    pub blocking: bool,
    /// The measured baseline only: send every frame as far as the socket takes it, as
    /// pfx did before whole frames at the link's rate (docs/nic.md, "Whole frames").
    pub send_every_frame: bool,
    /// `SO_SNDBUF` in bytes; None keeps the kernel default.
    pub send_buffer: Option<usize>,
}

/// Chooses the multicast interface by index (see `sys::net::set_multicast_ifindex`).
pub fn set_multicast_ifindex(socket: &Socket, ifindex: u32) -> io::Result<()> {
    crate::sys::net::set_multicast_ifindex(socket.as_raw_fd(), ifindex)
}

/// A UDP socket for one output: ephemeral source port (never 5568, see the sacn notes),
/// broadcast allowed, multicast out of the chosen interface.
pub fn open_udp(opts: &SocketOptions) -> io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
    s.set_nonblocking(!opts.blocking)?;
    s.set_broadcast(true)?;
    s.set_multicast_ttl_v4(opts.multicast_ttl)?;
    s.set_multicast_loop_v4(opts.multicast_loop)?;
    if let Some(n) = opts.send_buffer {
        set_send_buffer(&s, n)?;
    }
    s.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0).into())?;
    Ok(s)
}

/// Sets DF on a socket whose datagrams always fit one Ethernet frame (sACN <= 638 bytes,
/// DDP <= 1,478 on the wire). Why: an IPv4 datagram that may be fragmented needs a unique
/// IP ID, and the kernel pays for one per packet (`__ip_select_ident`: a siphash and a
/// random draw), about 15% of its send CPU for a 638-byte datagram (2,100 -> 1,800 ns on
/// lo). With DF set the datagram is atomic and RFC 6864 says its ID carries no meaning, so
/// the kernel skips that work. `IP_PMTUDISC_PROBE`, not `_DO`: DF without consulting the
/// path-MTU cache, so an ICMP "fragmentation needed" from some router can never make sends
/// fail with EMSGSIZE. The cost: on an interface whose MTU is below the datagram size the
/// kernel answers EMSGSIZE instead of fragmenting, so never use this for bigPacket, whose
/// datagrams are larger than the MTU by design.
pub fn set_dont_fragment(s: &Socket) -> io::Result<()> {
    crate::sys::net::set_int_option(
        s.as_raw_fd(),
        libc::IPPROTO_IP,
        libc::IP_MTU_DISCOVER,
        libc::IP_PMTUDISC_PROBE,
    )
}

/// SO_SNDBUFFORCE where the process may (CAP_NET_ADMIN, which the service has), so the
/// size is not silently capped at net.core.wmem_max; SO_SNDBUF otherwise.
fn set_send_buffer(s: &Socket, bytes: usize) -> io::Result<()> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    crate::sys::net::set_int_option(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v)
        .or_else(|_| s.set_send_buffer_size(bytes))
}
