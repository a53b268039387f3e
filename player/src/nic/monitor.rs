//! One reading of the show interface (`NicReader::read`), the one-shot `read_status`, and
//! `spawn_monitor`, which repeats the reading on its own thread with its own
//! current-thread runtime, so netlink never runs on the render thread.

use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ethtool::EthtoolHandle;

use super::pause::{self, OpError, StandardPauseStats};
use super::rate::CounterRate;
use super::{CounterReading, NicError, NicStatus, driver_stats, link};

/// Keeps the netlink connections and the previous counter values between readings.
pub struct NicReader {
    ethtool: EthtoolHandle,
    rtnl: rtnetlink::Handle,
    host: String,
    pause_rx: CounterRate,
    pause_tx: CounterRate,
    tx_timeouts: CounterRate,
}

/// The raw counters of one reading, before rates.
struct Counters {
    rx: (String, Option<u64>),
    tx: (String, Option<u64>),
    tx_timeouts: Option<u64>,
}

/// The host name a reading carries; "unknown" when it cannot be read.
pub fn hostname() -> String {
    crate::sys::host::hostname().unwrap_or_else(|| "unknown".into())
}

fn io_err(what: &str, e: std::io::Error) -> NicError {
    NicError::Io {
        what: what.into(),
        source: e,
    }
}

impl NicReader {
    /// Opens the netlink connections; must be called inside a tokio runtime.
    pub fn new() -> Result<Self, NicError> {
        let (conn, ethtool, _) =
            ethtool::new_connection().map_err(|e| io_err("opening ethtool netlink", e))?;
        tokio::spawn(conn);
        let (rconn, rtnl, _) =
            rtnetlink::new_connection().map_err(|e| io_err("opening rtnetlink", e))?;
        tokio::spawn(rconn);
        Ok(NicReader {
            ethtool,
            rtnl,
            host: hostname(),
            pause_rx: CounterRate::new(),
            pause_tx: CounterRate::new(),
            tx_timeouts: CounterRate::new(),
        })
    }

    pub async fn read(&mut self, iface: &str) -> Result<NicStatus, NicError> {
        let info = link::link_info(&self.rtnl, iface).await?;
        let driver = driver_stats::driver_name(iface).ok();
        let (speed, duplex) = link::speed_duplex(&mut self.ethtool, iface).await;
        let qdisc = link::root_qdisc_stats(&self.rtnl, info.index)
            .await
            .ok()
            .flatten();

        // The counters that get rates, read back to back, then the clock at once.
        let (settings, std_stats) = match pause::get_with_stats(&mut self.ethtool, iface).await {
            Ok((s, st)) => (Ok(s), st),
            Err(e) => (Err(e), StandardPauseStats::default()),
        };
        let drv = driver_stats::driver_stats(iface).unwrap_or_default();
        let txt = link::tx_timeouts(Path::new("/sys/class/net"), iface);
        let at = Instant::now();
        let read_at_unix_ms = crate::sys::time::unix_ms();

        let counters = pick_pause_counters(std_stats, &drv, txt);
        let pause_error = match &settings {
            Err(OpError::Errno(errno)) => Some(format!(
                "{} from driver {}",
                super::error::errno_text(*errno),
                driver.as_deref().unwrap_or("unknown")
            )),
            Err(OpError::Other(s)) => Some(s.clone()),
            Ok(None) => Some("driver reported no PAUSE settings".into()),
            Ok(Some(_)) => None,
        };

        Ok(NicStatus {
            interface: iface.to_string(),
            host: self.host.clone(),
            read_at_unix_ms,
            pause: settings.ok().flatten(),
            pause_error,
            pause_rx_frames: reading(counters.rx, &mut self.pause_rx, at),
            pause_tx_frames: reading(counters.tx, &mut self.pause_tx, at),
            tx_timeouts: reading(
                ("sysfs".to_string(), counters.tx_timeouts),
                &mut self.tx_timeouts,
                at,
            ),
            speed_mbps: speed,
            duplex,
            link: info.stats,
            qdisc: qdisc.as_ref().and_then(|q| q.kind.clone()),
            qdisc_drops: qdisc.as_ref().and_then(|q| q.drops),
            qdisc_backlog_bytes: qdisc.as_ref().and_then(|q| q.backlog_bytes),
            driver,
            error: None,
        })
    }
}

/// Standard pause stats where the driver has them, else the driver's `ethtool -S` name,
/// else unsupported (None): never a made-up 0.
fn pick_pause_counters(
    std_stats: StandardPauseStats,
    drv: &[(String, u64)],
    tx_timeouts: Option<u64>,
) -> Counters {
    let pick = |std: Option<u64>, names: &[&str]| -> (String, Option<u64>) {
        if let Some(v) = std {
            return ("standard".into(), Some(v));
        }
        match driver_stats::find_counter(drv, names) {
            Some((name, v)) => (format!("driver:{name}"), Some(v)),
            None => ("unsupported".into(), None),
        }
    };
    Counters {
        rx: pick(std_stats.rx, driver_stats::RX_PAUSE_NAMES),
        tx: pick(std_stats.tx, driver_stats::TX_PAUSE_NAMES),
        tx_timeouts,
    }
}

fn reading(
    (source, total): (String, Option<u64>),
    rate: &mut CounterRate,
    at: Instant,
) -> CounterReading {
    match total {
        Some(v) => CounterReading {
            source,
            total: Some(v),
            per_s: rate.update(v, at),
        },
        None => {
            rate.clear();
            CounterReading::unsupported()
        }
    }
}

/// One reading, no rates (there is no previous reading). Blocking.
pub fn read_status(iface: &str) -> Result<NicStatus, NicError> {
    let rt = super::netlink_runtime()?;
    rt.block_on(async {
        let mut r = NicReader::new()?;
        r.read(iface).await
    })
}

/// Stops the monitor thread when dropped.
pub struct MonitorHandle {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for MonitorHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Read `iface` every `period` on a dedicated thread and hand each reading to
/// `on_status`. A failed reading is delivered as a status with `error` set, and the
/// monitor keeps going (the interface may come back; its counters are then re-based).
pub fn spawn_monitor(
    iface: String,
    period: Duration,
    on_status: impl Fn(NicStatus) + Send + 'static,
) -> MonitorHandle {
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("pfx-nic-monitor".into())
        .spawn(move || monitor_loop(iface, period, stop_rx, on_status));
    let thread = match thread {
        Ok(t) => Some(t),
        Err(e) => {
            tracing::error!("could not start the NIC monitor thread: {e}");
            None
        }
    };
    MonitorHandle {
        stop: Some(stop_tx),
        thread,
    }
}

fn monitor_loop(
    iface: String,
    period: Duration,
    stop: mpsc::Receiver<()>,
    on_status: impl Fn(NicStatus),
) {
    let host = hostname();
    let failed = |e: &dyn std::fmt::Display| NicStatus {
        interface: iface.clone(),
        host: host.clone(),
        read_at_unix_ms: crate::sys::time::unix_ms(),
        pause_rx_frames: CounterReading::unsupported(),
        pause_tx_frames: CounterReading::unsupported(),
        tx_timeouts: CounterReading::unsupported(),
        error: Some(e.to_string()),
        ..Default::default()
    };
    let rt = match super::netlink_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            on_status(failed(&e));
            return;
        }
    };
    let reader = rt.block_on(async { NicReader::new() });
    let mut reader = match reader {
        Ok(r) => r,
        Err(e) => {
            on_status(failed(&e));
            return;
        }
    };
    let start = Instant::now();
    let mut n: u32 = 0;
    loop {
        match rt.block_on(reader.read(&iface)) {
            Ok(s) => on_status(s),
            Err(e) => on_status(failed(&e)),
        }
        // Absolute deadlines: start + n x period, skipping ones already past.
        n += 1;
        let mut next = start + period * n;
        let now = Instant::now();
        while next <= now {
            n += 1;
            next = start + period * n;
        }
        match stop.recv_timeout(next - now) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(list: &[(&str, u64)]) -> Vec<(String, u64)> {
        list.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn mock_macb_standard_stats_win_over_driver_names() {
        let std = StandardPauseStats {
            rx: Some(130),
            tx: Some(2),
        };
        let c = pick_pause_counters(std, &s(&[("rx_pause_frames", 129)]), None);
        assert_eq!(c.rx, ("standard".to_string(), Some(130)));
        assert_eq!(c.tx, ("standard".to_string(), Some(2)));
    }

    #[test]
    fn mock_bcmgenet_falls_back_to_driver_names() {
        let c = pick_pause_counters(
            StandardPauseStats::default(),
            &s(&[("rx_pause", 2_400_000), ("tx_pause", 0)]),
            Some(0),
        );
        assert_eq!(c.rx, ("driver:rx_pause".to_string(), Some(2_400_000)));
        assert_eq!(c.tx, ("driver:tx_pause".to_string(), Some(0)));
    }

    #[test]
    fn no_source_is_unsupported_not_zero() {
        let c = pick_pause_counters(
            StandardPauseStats::default(),
            &s(&[("peer_ifindex", 3)]),
            None,
        );
        assert_eq!(c.rx, ("unsupported".to_string(), None));
        let mut r = CounterRate::new();
        let out = reading(c.rx, &mut r, Instant::now());
        assert_eq!(out, CounterReading::unsupported());
    }

    #[test]
    fn readings_get_rates_from_the_second_on() {
        let t0 = Instant::now();
        let mut r = CounterRate::new();
        let a = reading(("standard".into(), Some(100)), &mut r, t0);
        assert_eq!(a.per_s, None);
        let b = reading(
            ("standard".into(), Some(230)),
            &mut r,
            t0 + Duration::from_secs(1),
        );
        assert_eq!(b.per_s, Some(130.0));
    }

    #[test]
    fn monitor_stops_on_drop_and_reports_unknown_interface() {
        let (tx, rx) = mpsc::channel();
        let h = spawn_monitor("pfx-nope0".into(), Duration::from_millis(50), move |s| {
            let _ = tx.send(s);
        });
        let s = rx.recv_timeout(Duration::from_secs(5)).unwrap();
        assert!(
            s.error.as_deref().unwrap_or("").contains("pfx-nope0"),
            "{s:?}"
        );
        assert_eq!(s.pause_rx_frames.total, None);
        drop(h);
        // After the drop the thread is joined; the channel drains and closes.
        while rx.recv_timeout(Duration::from_millis(10)).is_ok() {}
        assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    }
}
