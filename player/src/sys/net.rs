//! Network interfaces and socket options, as the kernel exposes them: `if_nametoindex(3)`,
//! `if_nameindex(3)`, `/sys/class/net/IF/{mtu,type}` and the `setsockopt` calls socket2
//! does not wrap.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

/// ARPHRD_LOOPBACK, the `type` sysfs gives a loopback interface.
const ARPHRD_LOOPBACK: &str = "772";

/// The interface's index, or None if no interface has that name (yet).
pub fn interface_index(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (idx != 0).then_some(idx)
}

/// Names of the interfaces in this network namespace (if_nameindex(3)).
pub fn interface_names() -> Vec<String> {
    let mut out = Vec::new();
    // SAFETY: if_nameindex returns a heap array terminated by a zero entry, or NULL.
    unsafe {
        let head = libc::if_nameindex();
        if head.is_null() {
            return out;
        }
        let mut p = head;
        while (*p).if_index != 0 && !(*p).if_name.is_null() {
            out.push(CStr::from_ptr((*p).if_name).to_string_lossy().into_owned());
            p = p.add(1);
        }
        libc::if_freenameindex(head);
    }
    out
}

/// The interface's MTU from sysfs; None when it cannot be read (no such interface).
pub fn mtu(iface: &str) -> Option<usize> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether the interface is a loopback one (sysfs `type` 772); false when it cannot be
/// read.
pub fn is_loopback(iface: &str) -> bool {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/type"))
        .is_ok_and(|t| t.trim() == ARPHRD_LOOPBACK)
}

/// `setsockopt` of one C int: the options socket2 does not wrap.
pub fn set_int_option(
    fd: RawFd,
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

/// Bytes a socket has handed to the kernel that have not yet left the host (SIOCOUTQ): for
/// UDP, the buffer memory (`truesize`, about twice a small datagram's length) of every
/// datagram still in the interface's queue or the driver's ring. It falls as the link
/// drains them, so it is how the output sees a link that is slower than the show.
pub fn send_queue_bytes(fd: RawFd) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: SIOCOUTQ (TIOCOUTQ) writes one c_int through the pointer, which is live.
    let rc = unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut v as *mut libc::c_int) };
    if rc == 0 {
        Ok(u64::try_from(v).unwrap_or(0))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The socket's send buffer as the kernel enforces it (SO_SNDBUF read back: the doubled
/// value, in the same `truesize` bytes as `send_queue_bytes`).
pub fn send_buffer_bytes(fd: RawFd) -> io::Result<u64> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the pointers describe a live c_int and its length.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDBUF,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(u64::try_from(v).unwrap_or(0))
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `IP_MULTICAST_IF` by interface index with `ip_mreqn`, which works whether or not the
/// interface has an IPv4 address.
pub fn set_multicast_ifindex(fd: RawFd, ifindex: u32) -> io::Result<()> {
    let mreqn = libc::ip_mreqn {
        imr_multiaddr: libc::in_addr { s_addr: 0 },
        imr_address: libc::in_addr { s_addr: 0 },
        imr_ifindex: ifindex as libc::c_int,
    };
    // SAFETY: the pointer and length describe a live ip_mreqn.
    let rc = unsafe {
        libc::setsockopt(
            fd,
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

/// The interface's first IPv4 address and its broadcast address (getifaddrs(3)); None
/// when it has no IPv4 address.
pub fn ipv4_of(iface: &str) -> Option<(std::net::Ipv4Addr, Option<std::net::Ipv4Addr>)> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut p = head;
    // SAFETY: each node and its fields stay valid until freeifaddrs; addresses are only
    // read as sockaddr_in when their family says AF_INET.
    unsafe {
        while !p.is_null() {
            let a = &*p;
            let addr = a.ifa_addr;
            if !addr.is_null()
                && i32::from((*addr).sa_family) == libc::AF_INET
                && !a.ifa_name.is_null()
                && CStr::from_ptr(a.ifa_name).to_bytes() == iface.as_bytes()
            {
                let sin = &*(addr as *const libc::sockaddr_in);
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                let bcast = a.ifa_ifu;
                let b = (!bcast.is_null()
                    && (a.ifa_flags & libc::IFF_BROADCAST as u32) != 0
                    && i32::from((*bcast).sa_family) == libc::AF_INET)
                    .then(|| {
                        let s = &*(bcast as *const libc::sockaddr_in);
                        std::net::Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr))
                    });
                found = Some((ip, b));
                break;
            }
            p = a.ifa_next;
        }
        libc::freeifaddrs(head);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_known_by_every_reader() {
        let idx = interface_index("lo").expect("lo exists");
        assert!(idx > 0);
        assert!(interface_names().iter().any(|n| n == "lo"));
        assert!(is_loopback("lo"));
        assert!(mtu("lo").is_some_and(|m| m >= 1500));
        assert_eq!(
            ipv4_of("lo").map(|a| a.0),
            Some(std::net::Ipv4Addr::LOCALHOST)
        );
        assert_eq!(ipv4_of("pfx-no-such-if0"), None);
    }

    #[test]
    fn unknown_interfaces_are_none_not_errors() {
        assert_eq!(interface_index("pfx-no-such-if0"), None);
        assert_eq!(interface_index("bad\0name"), None);
        assert!(!is_loopback("pfx-no-such-if0"));
        assert_eq!(mtu("pfx-no-such-if0"), None);
    }

    #[test]
    fn socket_options_report_the_kernels_errno() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp socket");
        use std::os::fd::AsRawFd;
        let fd = s.as_raw_fd();
        set_int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, 8192).expect("SO_SNDBUF");
        let e = set_int_option(fd, libc::SOL_SOCKET, 0x7fff, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOPROTOOPT));
        set_multicast_ifindex(fd, interface_index("lo").unwrap_or(1)).expect("IP_MULTICAST_IF lo");
    }
}
