//! What the unit says about itself to xLights: its channel ranges, the JSON documents, the
//! sequence meta read from an FSEQ header, and the v3 MultiSync ping. Pure.

use serde_json::{Value, json};

use crate::source::fseq::header::{Compression, Header};

/// The FPP API level pfx follows (docs/fpp-connect.md 2.1): at least 7.1 so xLights offers
/// the unit, below 9.3 so it strips the extra variable headers from sparse files.
pub const API_MAJOR: u16 = 9;
pub const API_MINOR: u16 = 0;
/// "FPP build, hardware undetermined": xLights offers FPP Connect only for 1..=0x7F.
pub const SYSTEM_TYPE: u8 = 0x01;
pub const MODEL: &str = "pfx";

pub const PING_PORT: u16 = 32320;
pub const PING_GROUP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(239, 70, 80, 80);
/// A v3 ping: 7-byte header + 294.
pub const PING_V3_LEN: usize = 301;
/// Room for channel ranges in a v3 ping.
pub const PING_RANGES_LEN: usize = 120;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Plays on its own (or leads MultiSync, with `multisync`).
    Player,
    /// Follows a MultiSync leader.
    Remote,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Player => "player",
            Mode::Remote => "remote",
        }
    }
    fn byte(self) -> u8 {
        match self {
            Mode::Player => 2,
            Mode::Remote => 8,
        }
    }
}

/// Who this unit is, as the discovery answers carry it.
#[derive(Debug, Clone)]
pub struct UnitInfo {
    pub hostname: String,
    pub uuid: String,
    /// pfx-player's own version.
    pub player_version: String,
    pub mode: Mode,
    /// Sends MultiSync (leads).
    pub multisync: bool,
    /// (0-based first channel, channel count), sorted, merged.
    pub ranges: Vec<(u32, u32)>,
}

impl UnitInfo {
    pub fn version_string(&self) -> String {
        let mut v = format!("{API_MAJOR}.{API_MINOR}-pfx-{}", self.player_version);
        v.truncate(39);
        v
    }
}

/// Each output's (0-based start, channels) → sorted ranges with overlaps and neighbours
/// merged.
pub fn merge_ranges(mut r: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    r.retain(|&(_, n)| n > 0);
    r.sort();
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(r.len());
    for (s, n) in r {
        if let Some(last) = out.last_mut() {
            let end = last.0 as u64 + last.1 as u64;
            if s as u64 <= end {
                let new_end = end.max(s as u64 + n as u64);
                last.1 = (new_end - last.0 as u64).min(u32::MAX as u64) as u32;
                continue;
            }
        }
        out.push((s, n));
    }
    out
}

/// `start-end,start-end` (0-based, end inclusive), at most `limit` characters: while too
/// long, the two ranges with the smallest gap between them become one (as FPP does).
pub fn ranges_text(ranges: &[(u32, u32)], limit: usize) -> String {
    let mut r: Vec<(u64, u64)> = ranges.iter().map(|&(s, n)| (s as u64, n as u64)).collect();
    loop {
        let text = r
            .iter()
            .map(|&(s, n)| format!("{}-{}", s, s + n.max(1) - 1))
            .collect::<Vec<_>>()
            .join(",");
        if text.len() <= limit || r.len() < 2 {
            return text;
        }
        let (mut best, mut gap) = (1, u64::MAX);
        for i in 1..r.len() {
            let g = r[i].0.saturating_sub(r[i - 1].0 + r[i - 1].1);
            if g < gap {
                gap = g;
                best = i;
            }
        }
        let end = r[best].0 + r[best].1;
        r[best - 1].1 = end - r[best - 1].0;
        r.remove(best);
    }
}

/// `GET /api/system/info`. `channelRanges` only when the unit has outputs: xLights'
/// `UpdateChannelRanges` asks again, without a pause or a count, for as long as the key
/// is there but empty; without the key it gives up after 20 tries.
pub fn system_info(u: &UnitInfo, media_free: u64, media_total: u64) -> Value {
    let mut v = json!({
        "HostName": u.hostname,
        "HostDescription": "",
        "Platform": "pfx",
        "Variant": MODEL,
        "Mode": u.mode.name(),
        "multisync": u.multisync,
        "Version": u.version_string(),
        "Branch": "pfx",
        "majorVersion": API_MAJOR,
        "minorVersion": API_MINOR,
        "typeId": SYSTEM_TYPE,
        "uuid": u.uuid,
        "Utilization": {"Disk": {"Media": {"Free": media_free, "Total": media_total}}},
    });
    let ranges = ranges_text(&u.ranges, usize::MAX);
    if !ranges.is_empty() {
        v["channelRanges"] = json!(ranges);
    }
    v
}

/// `GET /api/fppd/multiSyncSystems`: only this unit; `address` is where the request came in.
pub fn multisync_systems(u: &UnitInfo, address: &str) -> Value {
    json!({"systems": [{
        "address": address,
        "hostname": u.hostname,
        "uuid": u.uuid,
        "typeId": SYSTEM_TYPE,
        "type": "pfx",
        "version": u.version_string(),
        "majorVersion": API_MAJOR,
        "minorVersion": API_MINOR,
        "model": MODEL,
        "fppMode": u.mode.byte() | if u.multisync { 0x04 } else { 0 },
        "fppModeString": u.mode.name(),
        "multisync": u.multisync,
        "channelRanges": ranges_text(&u.ranges, usize::MAX),
        "HostDescription": "",
        "local": 1,
    }]})
}

/// `GET /api/sequence/NAME/meta`, from the stored file's header (the fields xLights
/// compares, docs/fpp-connect.md 1.3).
pub fn sequence_meta(name: &str, h: &Header) -> Value {
    let (ctype, cname) = match h.compression {
        Compression::None => (0, "none"),
        Compression::Zstd => (1, "zstd"),
        Compression::Zlib => (2, "zlib"),
    };
    let max_channel = h
        .sparse_ranges
        .iter()
        .map(|&(s, n)| s as u64 + n as u64)
        .max()
        .unwrap_or(0)
        .max(h.channel_count as u64);
    let mut m = json!({
        "Name": name,
        "Version": h.version(),
        "ID": h.unique_id.to_string(),
        "StepTime": h.step_ms,
        "NumFrames": h.frames,
        "MaxChannel": max_channel,
        "ChannelCount": h.channel_count,
    });
    if h.major >= 2 {
        m["CompressionType"] = json!(ctype);
        m["CompressionTypeString"] = json!(cname);
    }
    if !h.sparse_ranges.is_empty() {
        m["Ranges"] = Value::Array(
            h.sparse_ranges
                .iter()
                .map(|&(s, n)| json!({"Start": s, "Length": n}))
                .collect(),
        );
    }
    let mut vars = serde_json::Map::new();
    for v in &h.variable_headers {
        let code = v.code_str();
        let text: Vec<u8> = v.data.iter().copied().take_while(|&b| b != 0).collect();
        if code.chars().all(|c| c.is_ascii_graphic()) && text.iter().all(|b| (32..127).contains(b))
        {
            vars.insert(code, json!(String::from_utf8_lossy(&text)));
        }
    }
    if !vars.is_empty() {
        m["variableHeaders"] = Value::Object(vars);
    }
    m
}

/// Where a discover answer goes, in order (docs/fpp-connect.md 2.1, after FPP's
/// MultiSync ping handling): the broadcast address of the interface the ping came in on
/// (when it has one; loopback has none), then the address the ping carries (unless it is
/// 0.0.0.0, as xLights sends, or this unit's own), then the datagram's source when that
/// differs. All on `port`.
pub fn answer_targets(
    source: std::net::Ipv4Addr,
    carried: std::net::Ipv4Addr,
    local: std::net::Ipv4Addr,
    broadcast: Option<std::net::Ipv4Addr>,
    port: u16,
) -> Vec<std::net::SocketAddrV4> {
    let mut out: Vec<std::net::SocketAddrV4> = Vec::with_capacity(3);
    let mut add = |a: std::net::Ipv4Addr| {
        let t = std::net::SocketAddrV4::new(a, port);
        if !out.contains(&t) {
            out.push(t);
        }
    };
    if let Some(b) = broadcast {
        add(b);
    }
    if !carried.is_unspecified() && carried != local {
        add(carried);
    }
    add(source);
    out
}

/// The delay before an answer: uniform below 5 ms (FPP's), from `seed` (any varying
/// number, e.g. the monotonic clock's nanoseconds), so many units do not answer in one
/// burst.
pub fn answer_delay_ns(seed: u64) -> u64 {
    // splitmix64: the clock's low bits alone repeat at a steady ping rate.
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) % 5_000_000
}

/// A discover request we answer: an `FPPD` ping (any version) with the discover flag.
pub fn is_discover_ping(d: &[u8]) -> bool {
    matches!(crate::sync::packet::decode(d), Ok(crate::sync::packet::Packet::Ping(p)) if p.discover)
}

/// This unit as a MultiSync ping, the one identity both the FPP Connect responder and the
/// MultiSync socket (`app::sync`) answer with.
pub fn ping(u: &UnitInfo, addr: std::net::Ipv4Addr) -> crate::sync::packet::Ping {
    crate::sync::packet::Ping {
        version: 3,
        discover: false,
        system_type: SYSTEM_TYPE,
        major: API_MAJOR,
        minor: API_MINOR,
        mode: u.mode.byte() | if u.multisync { 0x04 } else { 0 },
        ipv4: addr,
        hostname: u.hostname.clone(),
        version_text: u.version_string(),
        model: MODEL.into(),
        ranges: ranges_text(&u.ranges, PING_RANGES_LEN),
    }
}

/// Our answer: a v3 ping (301 bytes) with the discover flag clear.
pub fn ping_v3(u: &UnitInfo, addr: std::net::Ipv4Addr) -> [u8; PING_V3_LEN] {
    crate::sync::packet::encode_ping_v3(&ping(u, addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit() -> UnitInfo {
        UnitInfo {
            hostname: "pole-unit-1".into(),
            uuid: "u".into(),
            player_version: "0.1.0".into(),
            mode: Mode::Player,
            multisync: false,
            ranges: vec![(0, 900), (1800, 900)],
        }
    }

    #[test]
    fn ranges_merge_and_print() {
        assert_eq!(
            merge_ranges(vec![(900, 900), (0, 900), (3000, 10), (3005, 10)]),
            vec![(0, 1800), (3000, 15)]
        );
        assert_eq!(
            ranges_text(&[(0, 900), (1800, 900)], 120),
            "0-899,1800-2699"
        );
        let many: Vec<(u32, u32)> = (0..40).map(|i| (i * 1000, 10)).collect();
        let t = ranges_text(&many, PING_RANGES_LEN);
        assert!(t.len() <= PING_RANGES_LEN, "{t}");
        assert!(t.starts_with("0-") && t.ends_with("-39009"), "{t}");
    }

    #[test]
    fn ping_fields_at_their_offsets() {
        let p = ping_v3(&unit(), std::net::Ipv4Addr::new(10, 1, 2, 3));
        assert_eq!(&p[0..5], b"FPPD\x04");
        assert_eq!(u16::from_le_bytes([p[5], p[6]]) as usize + 7, p.len());
        assert_eq!((p[7], p[8], p[9]), (3, 0, SYSTEM_TYPE));
        assert_eq!(u16::from_be_bytes([p[10], p[11]]), 9);
        assert_eq!(p[14], 2);
        assert_eq!(&p[15..19], &[10, 1, 2, 3]);
        assert_eq!(&p[19..30], b"pole-unit-1");
        assert_eq!(p[30], 0);
        assert!(p[84..124].starts_with(b"9.0-pfx-0.1.0\0"));
        assert!(p[125..165].starts_with(b"pfx\0"));
        assert!(p[166..286].starts_with(b"0-899,1800-2699\0"));
        assert!(
            !is_discover_ping(&p),
            "our answer is not a discover request"
        );
    }

    #[test]
    fn an_answer_goes_to_the_broadcast_then_the_carried_address_then_the_source() {
        use std::net::{Ipv4Addr, SocketAddrV4};
        let (src, me, bc) = (
            Ipv4Addr::new(10, 0, 0, 9),
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 255),
        );
        let at = |a| SocketAddrV4::new(a, 32320);
        // xLights: address 0.0.0.0 in the ping.
        assert_eq!(
            answer_targets(src, Ipv4Addr::UNSPECIFIED, me, Some(bc), 32320),
            vec![at(bc), at(src)]
        );
        // An FPP unit behind a relay: its own address and the relay's.
        let fpp = Ipv4Addr::new(10, 0, 1, 7);
        assert_eq!(
            answer_targets(src, fpp, me, Some(bc), 32320),
            vec![at(bc), at(fpp), at(src)]
        );
        // Loopback: no broadcast; the source once.
        assert_eq!(
            answer_targets(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, me, None, 32320),
            vec![at(Ipv4Addr::LOCALHOST)]
        );
        let d: Vec<u64> = (0..1000u64)
            .map(|i| answer_delay_ns(i * 1_000_000))
            .collect();
        assert!(d.iter().all(|&x| x < 5_000_000));
        assert!(d.iter().any(|&x| x < 1_000_000) && d.iter().any(|&x| x > 4_000_000));
    }

    #[test]
    fn system_info_never_carries_empty_channel_ranges() {
        let mut u = unit();
        assert_eq!(system_info(&u, 1, 2)["channelRanges"], "0-899,1800-2699");
        assert!(
            !system_info(&u, 1, 2)["uuid"]
                .as_str()
                .unwrap_or("")
                .is_empty()
        );
        u.ranges.clear();
        assert!(
            system_info(&u, 1, 2).get("channelRanges").is_none(),
            "xLights loops forever on an empty one"
        );
    }

    #[test]
    fn discover_requests() {
        let mut d = vec![0u8; 207];
        d[0..4].copy_from_slice(b"FPPD");
        d[4] = 4;
        d[5..7].copy_from_slice(&200u16.to_le_bytes());
        d[7] = 2;
        d[8] = 1;
        assert!(is_discover_ping(&d));
        d[8] = 0;
        assert!(!is_discover_ping(&d));
        d[8] = 1;
        assert!(!is_discover_ping(&d[..206]), "length must match");
        assert!(!is_discover_ping(b"FPPD"));
        let mut sync = d.clone();
        sync[4] = 1;
        assert!(!is_discover_ping(&sync));
    }

    #[test]
    fn long_host_names_are_cut_on_a_char_boundary() {
        let mut u = unit();
        u.hostname = "é".repeat(40);
        let p = ping_v3(&u, std::net::Ipv4Addr::LOCALHOST);
        // The field and the gap byte after it (FPP's layout: the gap ends a full field).
        let field = &p[19..84];
        let end = field.iter().position(|&b| b == 0).expect("nul");
        assert!(std::str::from_utf8(&field[..end]).is_ok());
    }
}
