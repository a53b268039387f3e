//! FPP MultiSync datagrams, byte for byte: the 7-byte control header, sync (open, start,
//! sync, stop), blank and ping (v1 and v2 read, v3 read and written). Pure: bytes in,
//! values out, and values into a caller's buffer. The layouts are in `docs/formats.md`.
//!
//! Everything here reads untrusted network bytes: a datagram whose length disagrees with
//! its header, or a body shorter than its type needs, is an error value, never a panic.

use core::net::Ipv4Addr;

/// The UDP port FPP units send and listen on.
pub const PORT: u16 = 32320;
/// FPP's multicast group ("239.F.P.P").
pub const GROUP: Ipv4Addr = Ipv4Addr::new(239, 70, 80, 80);
/// `FPPD`, type, body length (u16 little-endian).
pub const HEADER_LEN: usize = 7;
const MAGIC: &[u8; 4] = b"FPPD";

/// Packet types (the header's byte 4).
pub mod kind {
    pub const SYNC: u8 = 1;
    pub const BLANK: u8 = 3;
    pub const PING: u8 = 4;
}

/// A sync body is action, file type, frame (u32), seconds (f32) and the file name with
/// its terminating NUL: 11 bytes for an empty name.
const SYNC_FIXED: usize = 11;
/// The longest datagram FPP builds for a sync (its send buffer).
pub const MAX_SYNC_LEN: usize = 2048;
/// A v3 ping's body length, and the datagram's.
pub const PING_V3_BODY: usize = 294;
pub const PING_V3_LEN: usize = HEADER_LEN + PING_V3_BODY;
/// The shortest ping body FPP accepts (v1), and the longest v1 and v2 bodies.
const PING_MIN_BODY: usize = 169;
const PING_V2_MAX_BODY: usize = 214;

/// Ping fields, as offsets into the body (datagram offset − 7) and their widths.
const PING_HOST: (usize, usize) = (12, 64);
const PING_VERSION: (usize, usize) = (77, 40);
const PING_MODEL: (usize, usize) = (118, 40);
const PING_RANGES: (usize, usize) = (159, 120);

/// FPP's operating modes, as a ping carries them.
pub mod mode {
    pub const BRIDGE: u8 = 0x01;
    pub const PLAYER: u8 = 0x02;
    /// Or'ed in when the unit sends MultiSync (a master).
    pub const SENDS_SYNC: u8 = 0x04;
    pub const REMOTE: u8 = 0x08;
}

/// The system type a pfx unit announces: FPP's "other system" (not an FPP build, so a
/// tool does not take it for one and expect FPP's web API).
pub const SYSTEM_TYPE_OTHER: u8 = 0xC0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Start,
    Stop,
    Sync,
    Open,
}

impl Action {
    fn code(self) -> u8 {
        match self {
            Action::Start => 0,
            Action::Stop => 1,
            Action::Sync => 2,
            Action::Open => 3,
        }
    }
    fn from_code(c: u8) -> Option<Action> {
        Some(match c {
            0 => Action::Start,
            1 => Action::Stop,
            2 => Action::Sync,
            3 => Action::Open,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    Sequence,
    Media,
}

/// One sync packet. `name` is the file's base name on the master.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sync<'a> {
    pub action: Action,
    pub file_type: FileType,
    pub frame: u32,
    /// Seconds into the file on the master when it sent this.
    pub seconds: f32,
    pub name: &'a str,
}

/// A ping: who a unit is. Strings are what the fields hold up to their first NUL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ping {
    pub version: u8,
    /// "Answer me": the sender is looking for units.
    pub discover: bool,
    pub system_type: u8,
    pub major: u16,
    pub minor: u16,
    pub mode: u8,
    pub ipv4: Ipv4Addr,
    pub hostname: String,
    pub version_text: String,
    pub model: String,
    /// Channel ranges as text, `start-end[,start-end...]`; empty in a v1 ping.
    pub ranges: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Packet<'a> {
    Sync(Sync<'a>),
    Blank,
    Ping(Ping),
    /// A well-formed packet of a type pfx does not act on (commands, plugins, events).
    Other(u8),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{0} bytes: shorter than the 7-byte header")]
    Short(usize),
    #[error("no `FPPD` magic")]
    Magic,
    #[error("the header says {declared} body bytes, the datagram has {got}")]
    Length { declared: usize, got: usize },
    #[error("sync body of {0} bytes, at least 11 needed")]
    SyncShort(usize),
    #[error("sync action {0} is not open, start, sync or stop")]
    Action(u8),
    #[error("sync file type {0} is not sequence or media")]
    FileType(u8),
    #[error("sync file name is not UTF-8")]
    Name,
    #[error("ping body of {len} bytes does not fit ping version {version}")]
    PingLength { version: u8, len: usize },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    #[error("file name `{0}` contains a NUL byte")]
    NulInName(String),
    #[error("file name of {len} bytes does not fit a {max}-byte sync packet")]
    TooLong { len: usize, max: usize },
}

/// Reads one datagram.
pub fn decode(d: &[u8]) -> Result<Packet<'_>, DecodeError> {
    if d.len() < HEADER_LEN {
        return Err(DecodeError::Short(d.len()));
    }
    if &d[..4] != MAGIC {
        return Err(DecodeError::Magic);
    }
    let declared = usize::from(u16::from_le_bytes([d[5], d[6]]));
    let body = &d[HEADER_LEN..];
    if body.len() != declared {
        return Err(DecodeError::Length {
            declared,
            got: body.len(),
        });
    }
    match d[4] {
        kind::SYNC => decode_sync(body).map(Packet::Sync),
        kind::BLANK => Ok(Packet::Blank),
        kind::PING => decode_ping(body).map(Packet::Ping),
        other => Ok(Packet::Other(other)),
    }
}

fn decode_sync(b: &[u8]) -> Result<Sync<'_>, DecodeError> {
    // The name's NUL is part of the fixed size, but FPP's own receiver terminates the
    // buffer itself, so a sender that leaves the NUL out is still read.
    if b.len() < SYNC_FIXED - 1 {
        return Err(DecodeError::SyncShort(b.len()));
    }
    let action = Action::from_code(b[0]).ok_or(DecodeError::Action(b[0]))?;
    let file_type = match b[1] {
        0 => FileType::Sequence,
        1 => FileType::Media,
        t => return Err(DecodeError::FileType(t)),
    };
    let frame = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let seconds = f32::from_le_bytes([b[6], b[7], b[8], b[9]]);
    let raw = &b[10..];
    let raw = &raw[..raw.iter().position(|c| *c == 0).unwrap_or(raw.len())];
    let name = std::str::from_utf8(raw).map_err(|_| DecodeError::Name)?;
    Ok(Sync {
        action,
        file_type,
        frame,
        seconds,
        name,
    })
}

/// The text of a NUL-padded field, bounded by the field and by the body.
fn field(b: &[u8], (at, width): (usize, usize)) -> String {
    let end = (at + width).min(b.len());
    if at >= end {
        return String::new();
    }
    let f = &b[at..end];
    let f = &f[..f.iter().position(|c| *c == 0).unwrap_or(f.len())];
    String::from_utf8_lossy(f).into_owned()
}

fn decode_ping(b: &[u8]) -> Result<Ping, DecodeError> {
    let version = b.first().copied().unwrap_or(0);
    let bad = DecodeError::PingLength {
        version,
        len: b.len(),
    };
    if b.len() < PING_MIN_BODY
        || (version == 1 && b.len() > PING_MIN_BODY)
        || (version == 2 && b.len() > PING_V2_MAX_BODY)
    {
        return Err(bad);
    }
    Ok(Ping {
        version,
        discover: b[1] != 0,
        system_type: b[2],
        major: u16::from_be_bytes([b[3], b[4]]),
        minor: u16::from_be_bytes([b[5], b[6]]),
        mode: b[7],
        ipv4: Ipv4Addr::new(b[8], b[9], b[10], b[11]),
        hostname: field(b, PING_HOST),
        version_text: field(b, PING_VERSION),
        model: field(b, PING_MODEL),
        ranges: if b.len() > PING_MIN_BODY {
            field(b, PING_RANGES)
        } else {
            String::new()
        },
    })
}

fn header(out: &mut [u8], kind: u8, body: usize) {
    out[..4].copy_from_slice(MAGIC);
    out[4] = kind;
    out[5..7].copy_from_slice(&(body as u16).to_le_bytes());
}

/// Writes a sync packet into `out` (at least `18 + name.len()` bytes) and returns its
/// length. No allocation: the master calls this on the render thread.
pub fn encode_sync(out: &mut [u8], s: &Sync<'_>) -> Result<usize, EncodeError> {
    let name = s.name.as_bytes();
    if name.contains(&0) {
        return Err(EncodeError::NulInName(s.name.to_string()));
    }
    let len = HEADER_LEN + SYNC_FIXED + name.len();
    let max = out.len().min(MAX_SYNC_LEN);
    if len > max {
        return Err(EncodeError::TooLong {
            len: name.len(),
            max,
        });
    }
    // FPP's body length counts the name without its NUL (the NUL is the struct's own
    // byte), so the datagram is 7 + 11 + name length and ends in the NUL.
    header(out, kind::SYNC, SYNC_FIXED + name.len());
    let b = &mut out[HEADER_LEN..len];
    b[0] = s.action.code();
    b[1] = match s.file_type {
        FileType::Sequence => 0,
        FileType::Media => 1,
    };
    b[2..6].copy_from_slice(&s.frame.to_le_bytes());
    b[6..10].copy_from_slice(&s.seconds.to_le_bytes());
    b[10..10 + name.len()].copy_from_slice(name);
    b[10 + name.len()] = 0;
    Ok(len)
}

/// The blank packet: header only.
pub fn encode_blank() -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    header(&mut out, kind::BLANK, 0);
    out
}

/// Copies `s` into a NUL-padded field, cut at a character boundary when too long (the
/// field may be full, with no NUL: the byte after it is always a zero gap).
fn put_field(b: &mut [u8], (at, width): (usize, usize), s: &str) {
    let mut n = s.len().min(width);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    b[at..at + n].copy_from_slice(&s.as_bytes()[..n]);
}

/// A version 3 ping, 301 bytes. `p.version` is ignored (always 3).
pub fn encode_ping_v3(p: &Ping) -> [u8; PING_V3_LEN] {
    let mut out = [0u8; PING_V3_LEN];
    header(&mut out, kind::PING, PING_V3_BODY);
    let b = &mut out[HEADER_LEN..];
    b[0] = 3;
    b[1] = u8::from(p.discover);
    b[2] = p.system_type;
    b[3..5].copy_from_slice(&p.major.to_be_bytes());
    b[5..7].copy_from_slice(&p.minor.to_be_bytes());
    b[7] = p.mode;
    b[8..12].copy_from_slice(&p.ipv4.octets());
    put_field(b, PING_HOST, &p.hostname);
    put_field(b, PING_VERSION, &p.version_text);
    put_field(b, PING_MODEL, &p.model);
    put_field(b, PING_RANGES, &p.ranges);
    out
}

/// The fuzz target's body (`fuzz/fuzz_targets/multisync.rs`, and a stable-Rust run of
/// it in `player/tests/sync_fuzz.rs`): any datagram decodes or is refused without a panic,
/// and what decodes writes back to a datagram that decodes again to the same values.
pub fn fuzz_one(data: &[u8]) {
    match decode(data) {
        Ok(Packet::Sync(s)) => {
            let mut buf = [0u8; MAX_SYNC_LEN + 64];
            // A datagram longer than FPP's buffer decodes but cannot be written back.
            if let Ok(n) = encode_sync(&mut buf, &s) {
                let again = decode(&buf[..n]);
                let same = matches!(&again, Ok(Packet::Sync(t))
                    if t.action == s.action && t.file_type == s.file_type && t.frame == s.frame
                        && t.seconds.to_bits() == s.seconds.to_bits() && t.name == s.name);
                assert!(same, "sync round trip: {s:?} became {again:?}");
            }
        }
        Ok(Packet::Ping(p)) => {
            let d = encode_ping_v3(&p);
            assert!(
                matches!(decode(&d), Ok(Packet::Ping(q)) if q.version == 3 && q.ipv4 == p.ipv4 && q.mode == p.mode)
            );
        }
        Ok(_) | Err(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ping() -> Ping {
        Ping {
            version: 3,
            discover: false,
            system_type: SYSTEM_TYPE_OTHER,
            major: 0x0102,
            minor: 0x0304,
            mode: mode::PLAYER | mode::SENDS_SYNC,
            ipv4: Ipv4Addr::new(10, 0, 0, 7),
            hostname: "pole-a".into(),
            version_text: "0.1.0".into(),
            model: "pfx".into(),
            ranges: "1-1500".into(),
        }
    }

    #[test]
    fn sync_layout_is_fpps_byte_for_byte() {
        let mut buf = [0u8; 64];
        let n = encode_sync(
            &mut buf,
            &Sync {
                action: Action::Sync,
                file_type: FileType::Sequence,
                frame: 0x0102_0304,
                seconds: 1.5,
                name: "show.fseq",
            },
        )
        .unwrap();
        assert_eq!(n, 18 + 9);
        assert_eq!(&buf[..4], b"FPPD");
        assert_eq!(buf[4], 1);
        assert_eq!(u16::from_le_bytes([buf[5], buf[6]]), 11 + 9);
        assert_eq!(buf[7], 2, "action sync");
        assert_eq!(buf[8], 0, "sequence");
        assert_eq!(&buf[9..13], &[4, 3, 2, 1], "frame, little-endian");
        assert_eq!(&buf[13..17], &1.5f32.to_le_bytes());
        assert_eq!(&buf[17..26], b"show.fseq");
        assert_eq!(buf[26], 0, "the name's NUL is the last byte");
        match decode(&buf[..n]).unwrap() {
            Packet::Sync(s) => {
                assert_eq!(
                    (s.action, s.frame, s.seconds, s.name),
                    (Action::Sync, 0x0102_0304, 1.5, "show.fseq")
                );
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn every_action_round_trips() {
        for (a, code) in [
            (Action::Start, 0),
            (Action::Stop, 1),
            (Action::Sync, 2),
            (Action::Open, 3),
        ] {
            let mut buf = [0u8; 32];
            let s = Sync {
                action: a,
                file_type: FileType::Media,
                frame: 7,
                seconds: 0.0,
                name: "a",
            };
            let n = encode_sync(&mut buf, &s).unwrap();
            assert_eq!(buf[7], code);
            assert_eq!(buf[8], 1);
            assert_eq!(decode(&buf[..n]).unwrap(), Packet::Sync(s));
        }
    }

    #[test]
    fn length_mismatch_and_garbage_are_dropped() {
        let mut buf = [0u8; 32];
        let n = encode_sync(
            &mut buf,
            &Sync {
                action: Action::Start,
                file_type: FileType::Sequence,
                frame: 0,
                seconds: 0.0,
                name: "x",
            },
        )
        .unwrap();
        assert_eq!(
            decode(&buf[..n - 1]),
            Err(DecodeError::Length {
                declared: 12,
                got: 11
            })
        );
        assert_eq!(
            decode(&buf[..n + 1]),
            Err(DecodeError::Length {
                declared: 12,
                got: 13
            })
        );
        assert_eq!(decode(b"FPP"), Err(DecodeError::Short(3)));
        assert_eq!(decode(b"XPPD\x01\x00\x00"), Err(DecodeError::Magic));
        // A sync body too short for its fixed fields.
        assert_eq!(
            decode(b"FPPD\x01\x02\x00\x00\x00"),
            Err(DecodeError::SyncShort(2))
        );
        let mut bad = buf;
        bad[7] = 9;
        assert_eq!(decode(&bad[..n]), Err(DecodeError::Action(9)));
        bad[7] = 0;
        bad[8] = 5;
        assert_eq!(decode(&bad[..n]), Err(DecodeError::FileType(5)));
    }

    #[test]
    fn a_name_without_its_nul_is_still_read() {
        let mut d = b"FPPD\x01\x0c\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00ab".to_vec();
        d[5] = (d.len() - 7) as u8;
        match decode(&d).unwrap() {
            Packet::Sync(s) => assert_eq!((s.frame, s.name), (5, "ab")),
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn names_that_cannot_be_sent_are_refused() {
        let mut buf = [0u8; MAX_SYNC_LEN + 100];
        let long = "n".repeat(MAX_SYNC_LEN);
        let s = Sync {
            action: Action::Open,
            file_type: FileType::Sequence,
            frame: 0,
            seconds: 0.0,
            name: &long,
        };
        assert!(matches!(
            encode_sync(&mut buf, &s),
            Err(EncodeError::TooLong { .. })
        ));
        let s = Sync { name: "a\0b", ..s };
        assert!(matches!(
            encode_sync(&mut buf, &s),
            Err(EncodeError::NulInName(_))
        ));
    }

    #[test]
    fn blank_is_a_bare_header() {
        assert_eq!(&encode_blank(), b"FPPD\x03\x00\x00");
        assert_eq!(decode(&encode_blank()), Ok(Packet::Blank));
    }

    #[test]
    fn ping_v3_layout_is_fpps_byte_for_byte() {
        let d = encode_ping_v3(&ping());
        assert_eq!(d.len(), 301);
        assert_eq!(&d[..7], b"FPPD\x04\x26\x01", "type 4, body 294 = 0x126 LE");
        assert_eq!(d[7], 3, "version");
        assert_eq!(d[8], 0, "not a discover");
        assert_eq!(d[9], 0xC0);
        assert_eq!(&d[10..14], &[1, 2, 3, 4], "versions big-endian");
        assert_eq!(d[14], 0x06);
        assert_eq!(&d[15..19], &[10, 0, 0, 7]);
        assert_eq!(&d[19..25], b"pole-a");
        assert!(d[25..84].iter().all(|b| *b == 0));
        assert_eq!(&d[84..89], b"0.1.0");
        assert_eq!(&d[125..128], b"pfx");
        assert_eq!(&d[166..172], b"1-1500");
        assert!(d[172..].iter().all(|b| *b == 0));
        assert_eq!(decode(&d), Ok(Packet::Ping(ping())));
    }

    #[test]
    fn full_width_ping_fields_keep_their_gaps() {
        let p = Ping {
            hostname: "h".repeat(80),
            model: "é".repeat(30),
            ..ping()
        };
        let d = encode_ping_v3(&p);
        assert_eq!(&d[19..83], "h".repeat(64).as_bytes());
        assert_eq!(d[83], 0);
        // 20 two-byte characters fill the 40-byte model field exactly.
        assert_eq!(&d[125..165], "é".repeat(20).as_bytes());
        match decode(&d).unwrap() {
            Packet::Ping(q) => {
                assert_eq!(q.hostname, "h".repeat(64));
                assert_eq!(q.model, "é".repeat(20));
            }
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn ping_v1_and_v2_lengths_follow_fpp() {
        let mut v1 = vec![0u8; 7 + 169];
        v1[..7].copy_from_slice(b"FPPD\x04\xa9\x00");
        v1[7] = 1;
        v1[8] = 1;
        v1[19..23].copy_from_slice(b"fpp1");
        match decode(&v1).unwrap() {
            Packet::Ping(p) => {
                assert_eq!(
                    (
                        p.version,
                        p.discover,
                        p.hostname.as_str(),
                        p.ranges.as_str()
                    ),
                    (1, true, "fpp1", "")
                );
            }
            p => panic!("{p:?}"),
        }
        // A v1 ping longer than v1 is refused; a v2 of 200 bytes (xLights' discover) is read.
        let mut long_v1 = vec![0u8; 7 + 200];
        long_v1[..7].copy_from_slice(b"FPPD\x04\xc8\x00");
        long_v1[7] = 1;
        assert!(matches!(
            decode(&long_v1),
            Err(DecodeError::PingLength { version: 1, .. })
        ));
        long_v1[7] = 2;
        assert!(matches!(decode(&long_v1), Ok(Packet::Ping(_))));
        let mut short = vec![0u8; 7 + 100];
        short[..7].copy_from_slice(b"FPPD\x04\x64\x00");
        assert!(matches!(
            decode(&short),
            Err(DecodeError::PingLength { .. })
        ));
    }

    #[test]
    fn other_types_are_recognised_not_acted_on() {
        assert_eq!(decode(b"FPPD\x06\x01\x00x"), Ok(Packet::Other(6)));
    }

    #[test]
    fn no_prefix_of_a_valid_packet_panics() {
        let mut buf = [0u8; 64];
        let n = encode_sync(
            &mut buf,
            &Sync {
                action: Action::Sync,
                file_type: FileType::Sequence,
                frame: 1,
                seconds: 0.1,
                name: "abc",
            },
        )
        .unwrap();
        let ping = encode_ping_v3(&ping());
        for d in [&buf[..n], &ping[..]] {
            for k in 0..d.len() {
                let _ = decode(&d[..k]);
            }
        }
    }
}
