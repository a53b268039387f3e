//! Driver statistics (`ethtool -S`) and the driver's name, over the SIOCETHTOOL ioctl.
//!
//! ETHTOOL_GSTATS has no netlink equivalent (the kernel's ethtool-netlink.rst lists it as
//! "n/a"), so this is the same ioctl sequence the `ethtool` tool uses:
//! GSSET_INFO (how many) -> GSTRINGS (names) -> GSTATS (values).

use std::ffi::c_void;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::NicError;

const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// Refuse absurd counts instead of allocating whatever a driver says.
const MAX_STATS: usize = 16_384;

/// Names drivers use for received PAUSE frames in `ethtool -S`, in the order tried:
/// bcmgenet (Pi 4), macb/GEM (Pi 5), lan78xx (Pi 3B+).
pub const RX_PAUSE_NAMES: &[&str] = &["rx_pause", "rx_pause_frames", "RX Pause Frames"];
/// The same for PAUSE frames sent.
pub const TX_PAUSE_NAMES: &[&str] = &["tx_pause", "tx_pause_frames", "TX Pause Frames"];

/// Find a counter by the first of `names` the driver has. Exact, case-sensitive names:
/// a fuzzy match could pick `rx_pause_errors` or a per-queue counter and call it PAUSE.
pub fn find_counter<'a>(stats: &'a [(String, u64)], names: &[&str]) -> Option<(&'a str, u64)> {
    names.iter().find_map(|want| {
        stats
            .iter()
            .find(|(n, _)| n == want)
            .map(|(n, v)| (n.as_str(), *v))
    })
}

fn socket() -> Result<OwnedFd, NicError> {
    // SAFETY: plain socket(2); the fd is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(NicError::Io {
            what: "socket for SIOCETHTOOL".into(),
            source: std::io::Error::last_os_error(),
        });
    }
    // SAFETY: fd is a fresh, valid descriptor.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One SIOCETHTOOL call with `data` as the ethtool command buffer. Returns the errno.
fn ethtool_ioctl(fd: &OwnedFd, iface: &str, data: *mut c_void) -> Result<(), i32> {
    // SAFETY: ifreq is plain old data; zeroed is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let bytes = iface.as_bytes();
    if bytes.len() >= ifr.ifr_name.len() {
        return Err(libc::ENODEV);
    }
    for (dst, src) in ifr.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = data.cast();
    // SAFETY: ifr points to a valid ifreq whose data pointer is a buffer sized for the
    // command written at its start, as the kernel expects for that command.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL as _, &mut ifr) };
    if rc < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    } else {
        Ok(())
    }
}

#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// The kernel driver's name (`ethtool -i`), e.g. `bcmgenet`, `virtio_net`, `veth`.
pub fn driver_name(iface: &str) -> Result<String, i32> {
    let fd = socket().map_err(|e| e.errno().unwrap_or(libc::EIO))?;
    // SAFETY: DrvInfo is plain old data.
    let mut info: DrvInfo = unsafe { std::mem::zeroed() };
    info.cmd = ETHTOOL_GDRVINFO;
    ethtool_ioctl(&fd, iface, (&mut info as *mut DrvInfo).cast())?;
    Ok(c_str(&info.driver))
}

fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: [u32; 1],
}

/// All of the driver's `ethtool -S` counters, in the driver's order. Err is the errno
/// (EOPNOTSUPP when the driver has none).
pub fn driver_stats(iface: &str) -> Result<Vec<(String, u64)>, i32> {
    let fd = socket().map_err(|e| e.errno().unwrap_or(libc::EIO))?;

    let mut sset = SsetInfo {
        cmd: ETHTOOL_GSSET_INFO,
        reserved: 0,
        sset_mask: 1 << ETH_SS_STATS,
        data: [0],
    };
    ethtool_ioctl(&fd, iface, (&mut sset as *mut SsetInfo).cast())?;
    if sset.sset_mask & (1 << ETH_SS_STATS) == 0 {
        return Err(libc::EOPNOTSUPP);
    }
    let n = sset.data[0] as usize;
    if n == 0 {
        return Ok(Vec::new());
    }
    if n > MAX_STATS {
        return Err(libc::EOVERFLOW);
    }

    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
    let str_bytes = 12 + n * ETH_GSTRING_LEN;
    let mut strings = vec![0u32; str_bytes.div_ceil(4)];
    strings[0] = ETHTOOL_GSTRINGS;
    strings[1] = ETH_SS_STATS;
    strings[2] = n as u32;
    ethtool_ioctl(&fd, iface, strings.as_mut_ptr().cast())?;
    // The kernel may report fewer strings than asked (a driver's count changed between
    // calls); never read past what it wrote.
    let got = (strings[2] as usize).min(n);
    // SAFETY: the Vec<u32> owns at least str_bytes bytes; viewing them as u8 is sound.
    let str_view: &[u8] =
        unsafe { std::slice::from_raw_parts(strings.as_ptr().cast::<u8>(), str_bytes) };
    let names: Vec<String> = (0..got)
        .map(|i| c_str(&str_view[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN]))
        .collect();

    // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
    let mut stats = vec![0u64; 1 + n];
    {
        let head = stats.as_mut_ptr().cast::<u32>();
        // SAFETY: the first u64 of the buffer holds the two u32 header fields.
        unsafe {
            head.write(ETHTOOL_GSTATS);
            head.add(1).write(n as u32);
        }
    }
    ethtool_ioctl(&fd, iface, stats.as_mut_ptr().cast())?;
    // SAFETY: as above, reading the header back.
    let n_stats = unsafe { stats.as_ptr().cast::<u32>().add(1).read() } as usize;
    let count = n_stats.min(got);
    Ok(names
        .into_iter()
        .take(count)
        .zip(stats[1..=count].iter().copied())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn mock_bcmgenet_pi4_names() {
        // Excerpt of `ethtool -S eth0` on a Pi 4 (bcmgenet MIB counters).
        let st = s(&[
            ("rx_64_octets", 10),
            ("rx_pause", 2_400_000),
            ("rx_unknown_op", 0),
            ("tx_pause", 0),
            ("tx_control", 0),
        ]);
        assert_eq!(
            find_counter(&st, RX_PAUSE_NAMES),
            Some(("rx_pause", 2_400_000))
        );
        assert_eq!(find_counter(&st, TX_PAUSE_NAMES), Some(("tx_pause", 0)));
    }

    #[test]
    fn mock_macb_pi5_names() {
        let st = s(&[
            ("rx_frames", 99),
            ("rx_pause_frames", 130),
            ("tx_pause_frames", 4),
        ]);
        assert_eq!(
            find_counter(&st, RX_PAUSE_NAMES),
            Some(("rx_pause_frames", 130))
        );
        assert_eq!(
            find_counter(&st, TX_PAUSE_NAMES),
            Some(("tx_pause_frames", 4))
        );
    }

    #[test]
    fn mock_lan78xx_pi3_names() {
        let st = s(&[("RX Pause Frames", 7), ("TX Pause Frames", 1)]);
        assert_eq!(
            find_counter(&st, RX_PAUSE_NAMES),
            Some(("RX Pause Frames", 7))
        );
        assert_eq!(
            find_counter(&st, TX_PAUSE_NAMES),
            Some(("TX Pause Frames", 1))
        );
    }

    #[test]
    fn similar_names_are_not_pause_counters() {
        // veth and others: nothing that is really a PAUSE counter; never guess.
        let st = s(&[
            ("peer_ifindex", 5),
            ("rx_pause_errors", 3),
            ("rx_queue_0_xdp_packets", 0),
            ("Rx_Pause", 1),
        ]);
        assert_eq!(find_counter(&st, RX_PAUSE_NAMES), None);
        assert_eq!(find_counter(&st, TX_PAUSE_NAMES), None);
    }
}
