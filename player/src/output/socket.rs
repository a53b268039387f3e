use std::ffi::CString;
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
    /// `SO_SNDBUF` in bytes; None keeps the kernel default.
    pub send_buffer: Option<usize>,
}

/// The interface's index, or None if no interface has that name (yet).
pub fn interface_index(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (idx != 0).then_some(idx)
}

/// Chooses the multicast interface by index with `ip_mreqn`, which works whether or not
/// the interface has an IPv4 address.
pub fn set_multicast_ifindex(socket: &Socket, ifindex: u32) -> io::Result<()> {
    let mreqn = libc::ip_mreqn {
        imr_multiaddr: libc::in_addr { s_addr: 0 },
        imr_address: libc::in_addr { s_addr: 0 },
        imr_ifindex: ifindex as libc::c_int,
    };
    // SAFETY: the pointer and length describe a live ip_mreqn.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_MULTICAST_IF,
            (&mreqn as *const libc::ip_mreqn).cast(),
            std::mem::size_of::<libc::ip_mreqn>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `setsockopt` of one C int: the options socket2 does not wrap.
pub fn set_int_option(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the pointer and length describe a live c_int.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
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
    set_int_option(
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
    set_int_option(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, v)
        .or_else(|_| s.set_send_buffer_size(bytes))
}
