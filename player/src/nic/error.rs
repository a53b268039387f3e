//! Errors of the NIC layer. A driver's refusal keeps its errno and names the driver,
//! because "Operation not supported from driver virtio_net" is the answer an operator needs.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum NicError {
    #[error("no interface named {name:?} on this host; interfaces here: {}", list_or_none(.available))]
    UnknownInterface {
        name: String,
        available: Vec<String>,
    },
    #[error("{op} on {iface}: {} from driver {driver}", errno_text(*.errno))]
    Driver {
        iface: String,
        op: &'static str,
        errno: i32,
        driver: String,
    },
    #[error("{what}: {detail}")]
    Netlink { what: String, detail: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "PAUSE on {iface} still reads {read_back} after setting it off (driver {driver}); the driver accepted the set but did not apply it"
    )]
    NotApplied {
        iface: String,
        read_back: String,
        driver: String,
    },
    #[error(
        "gave up on {iface} after {waited_s:.1} s (--wait): {last}; raise --wait or check that the interface gets brought up"
    )]
    WaitExpired {
        iface: String,
        waited_s: f64,
        last: String,
    },
}

impl NicError {
    /// The errno carried by a driver/netlink refusal, if any.
    pub fn errno(&self) -> Option<i32> {
        match self {
            NicError::Driver { errno, .. } => Some(*errno),
            NicError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "(none)".into()
    } else {
        v.join(", ")
    }
}

/// `Operation not supported (EOPNOTSUPP)`: the C library's text plus the symbol.
pub fn errno_text(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    // std appends " (os error N)"; keep only the message.
    let msg = text
        .split(" (os error")
        .next()
        .unwrap_or(text.as_str())
        .to_string();
    format!("{msg} ({})", errno_name(errno))
}

/// Symbolic name of the errnos a NIC operation can return.
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        libc::ENETDOWN => "ENETDOWN",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EINVAL => "EINVAL",
        libc::EBUSY => "EBUSY",
        libc::EAGAIN => "EAGAIN",
        libc::ENOENT => "ENOENT",
        libc::ENXIO => "ENXIO",
        libc::EIO => "EIO",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => return format!("errno {errno}"),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_error_names_errno_and_driver() {
        let e = NicError::Driver {
            iface: "eth0".into(),
            op: "PAUSE set",
            errno: libc::EOPNOTSUPP,
            driver: "virtio_net".into(),
        };
        assert_eq!(
            e.to_string(),
            "PAUSE set on eth0: Operation not supported (EOPNOTSUPP) from driver virtio_net"
        );
    }

    #[test]
    fn unknown_interface_lists_interfaces() {
        let e = NicError::UnknownInterface {
            name: "eht0".into(),
            available: vec!["lo".into(), "eth0".into()],
        };
        let s = e.to_string();
        assert!(s.contains("\"eht0\"") && s.contains("lo, eth0"), "{s}");
    }
}
