use std::io;
use std::ops::Range;
use std::os::fd::RawFd;

use crate::wire::Datagrams;

/// What one `send` did: how many datagrams the kernel took, and the errno that stopped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SendOutcome {
    pub sent: usize,
    pub bytes: usize,
    pub errno: Option<i32>,
}

impl SendOutcome {
    /// One frame's outcome from its two halves: counts add up, and the first half's errno
    /// wins because it is the one a single-threaded send would have stopped at.
    pub fn merge(self, second: SendOutcome) -> SendOutcome {
        SendOutcome {
            sent: self.sent + second.sent,
            bytes: self.bytes + second.bytes,
            errno: self.errno.or(second.errno),
        }
    }
}

/// Reusable `sendmmsg` arrays for one output, sized once for its largest batch.
pub struct Sender {
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    addrs: Vec<libc::sockaddr_in>,
}

// SAFETY: the raw pointers inside are rebuilt before every use and only point into the
// `Datagrams` borrowed for that call; nothing is shared between threads while in use.
unsafe impl Send for Sender {}

impl Sender {
    pub fn new(capacity: usize) -> Sender {
        Sender {
            // SAFETY: all-zero is a valid value for these plain C structs.
            msgs: vec![unsafe { std::mem::zeroed() }; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                capacity
            ],
            addrs: vec![unsafe { std::mem::zeroed() }; capacity],
        }
    }

    /// Hands the whole batch to the kernel with as few `sendmmsg` calls as it takes. With
    /// `dontwait`, a full socket buffer (EAGAIN) or device queue (ENOBUFS) ends the frame
    /// for this output at once: the caller drops the rest and counts it. A blocking socket
    /// (the measured baseline) waits in the kernel instead.
    pub fn send(&mut self, fd: RawFd, batch: &Datagrams, dontwait: bool) -> SendOutcome {
        self.send_range(fd, batch, 0..batch.len(), dontwait)
    }

    /// `send` for the datagrams `range` of the batch only, so two threads can each hand
    /// the kernel part of one frame. A range past the batch or the arrays is cut short.
    pub fn send_range(
        &mut self,
        fd: RawFd,
        batch: &Datagrams,
        range: Range<usize>,
        dontwait: bool,
    ) -> SendOutcome {
        self.send_rotated(fd, batch, range, 0, 0, dontwait)
    }

    /// `send_range`, with the range's first `body` datagrams in rotated order: from
    /// `start` (an index within the body) to the body's end, then from its beginning; the
    /// datagrams after the body (a sync packet, DDP's PUSH packet) go last, in order, and
    /// only once every datagram before them went. `SendOutcome::sent` counts in this
    /// order, so the first datagram that did not go is the body's `(start + sent) % body`.
    pub fn send_rotated(
        &mut self,
        fd: RawFd,
        batch: &Datagrams,
        range: Range<usize>,
        body: usize,
        start: usize,
        dontwait: bool,
    ) -> SendOutcome {
        let first = range.start;
        let n = range
            .end
            .min(batch.len())
            .saturating_sub(first)
            .min(self.msgs.len());
        let body = body.min(n);
        let start = if body == 0 { 0 } else { start % body };
        for i in 0..n {
            let at = if i < body { (start + i) % body } else { i };
            let (data, dest) = batch.get(first + at);
            self.addrs[i] = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: dest.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*dest.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            self.iovs[i] = libc::iovec {
                iov_base: data.as_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
        }
        for i in 0..n {
            let h = &mut self.msgs[i].msg_hdr;
            h.msg_name = (&mut self.addrs[i] as *mut libc::sockaddr_in).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            h.msg_flags = 0;
            self.msgs[i].msg_len = 0;
        }
        let flags = if dontwait { libc::MSG_DONTWAIT } else { 0 };
        let mut out = SendOutcome::default();
        while out.sent < n {
            let rest = &mut self.msgs[out.sent..n];
            // SAFETY: `rest` points at `rest.len()` initialised mmsghdrs whose buffers live
            // in `batch` and `self`, both borrowed for the duration of the call.
            let rc =
                unsafe { libc::sendmmsg(fd, rest.as_mut_ptr(), rest.len() as libc::c_uint, flags) };
            if rc < 0 {
                let e = io::Error::last_os_error().raw_os_error().unwrap_or(0);
                if e == libc::EINTR {
                    continue;
                }
                out.errno = Some(e);
                break;
            }
            for m in &rest[..rc as usize] {
                out.bytes += m.msg_len as usize;
            }
            out.sent += rc as usize;
        }
        out
    }
}
