//! `GET`/`POST /api/channel/output/universeOutputs` (docs/fpp-connect.md 2.7): the unit's
//! outputs in FPP's universe-output layout, so xLights (and an operator) can compare them
//! with its own controller table; the checks on a table xLights posts; and where the two
//! disagree (what `doctor` prints). Pure.
//!
//! FPP's layout: `{"channelOutputs":[{"type":"universes","enabled":1,"startChannel":1,
//! "channelCount":-1,"universes":[...]}]}`, each universe `{"active","description","id",
//! "startChannel" (1-based),"channelCount","type","address","priority","universeCount"}`,
//! `type` 0 sACN multicast, 1 sACN unicast, 4 DDP with absolute channel offsets, 5 DDP
//! with offsets from the output's first channel (what pfx sends); `universeCount` n means
//! n universes of `channelCount` channels each, numbered from `id`.

use serde_json::{Value, json};

use crate::config::profile::Protocol;
use crate::config::show::ResolvedOutput;

/// At most this many entries in a posted table (FPP's own UI makes a few hundred).
pub const MAX_UNIVERSES: usize = 65_536;
/// The highest channel a table may name (FSEQ channel counts are u32; FPP's are ~8M).
pub const MAX_CHANNEL: u64 = 1 << 26;

/// One run of channels to one destination, as both sides can describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    /// 0-based first channel.
    pub start: u64,
    pub channels: u64,
    /// `sacn u` (multicast or unicast to `addr`), `ddp`.
    pub kind: Kind,
    /// The destination's IPv4 address; empty for sACN multicast (the universe says).
    pub addr: String,
    /// Who this is: a pfx output's name, or the table entry's description.
    pub who: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sacn(u32),
    Ddp,
}

impl Kind {
    fn text(self) -> String {
        match self {
            Kind::Sacn(u) => format!("sACN universe {u}"),
            Kind::Ddp => "DDP".into(),
        }
    }
}

/// The outputs as FPP lists universe outputs. bigPacket has no FPP type: such outputs
/// are listed under `pfxOnly`, which FPP and xLights do not read.
pub fn universe_outputs(outputs: &[ResolvedOutput]) -> Value {
    let mut universes = Vec::new();
    let mut pfx_only = Vec::new();
    for o in outputs {
        let channels = o.profile.channels() as u64;
        let ip = o.destination.ip();
        let unicast = !ip.is_multicast();
        match o.profile.protocol {
            Protocol::Sacn => {
                let s = o.profile.sacn.clone().unwrap_or_default();
                let size = u64::from(s.universe_size.max(1));
                universes.push(json!({
                    "active": 1,
                    "description": o.name,
                    "id": s.first_universe,
                    "startChannel": o.start as u64 + 1,
                    "channelCount": size,
                    "universeCount": channels.div_ceil(size).max(1),
                    "type": if unicast { 1 } else { 0 },
                    "address": if unicast { ip.to_string() } else { String::new() },
                    "priority": s.priority,
                    "deDuplicate": 0,
                    "monitor": 0,
                }));
            }
            Protocol::Ddp => universes.push(json!({
                "active": 1,
                "description": o.name,
                "id": 1,
                "startChannel": o.start as u64 + 1,
                "channelCount": channels,
                "universeCount": 1,
                "type": 5,
                "address": ip.to_string(),
                "priority": 0,
                "deDuplicate": 0,
                "monitor": 0,
            })),
            Protocol::Bigpacket => pfx_only.push(json!({
                "description": o.name,
                "protocol": "bigpacket",
                "startChannel": o.start as u64 + 1,
                "channelCount": channels,
                "destination": o.destination.to_string(),
            })),
        }
    }
    json!({
        "channelOutputs": [{
            "type": "universes",
            "enabled": 1,
            "timeout": 1000,
            "startChannel": 1,
            "channelCount": -1,
            "universes": universes,
            "pfxOnly": pfx_only,
        }],
        "status": "OK",
    })
}

/// The unit's outputs as pieces (sACN: one per universe).
pub fn our_pieces(outputs: &[ResolvedOutput]) -> Vec<Piece> {
    let mut out = Vec::new();
    for o in outputs {
        let channels = o.profile.channels() as u64;
        let ip = o.destination.ip();
        let addr = if ip.is_multicast() {
            String::new()
        } else {
            ip.to_string()
        };
        match o.profile.protocol {
            Protocol::Sacn => {
                let s = o.profile.sacn.clone().unwrap_or_default();
                let size = u64::from(s.universe_size.max(1));
                let mut at = 0;
                let mut u = u32::from(s.first_universe);
                while at < channels {
                    let n = size.min(channels - at);
                    out.push(Piece {
                        start: o.start as u64 + at,
                        channels: n,
                        kind: Kind::Sacn(u),
                        addr: addr.clone(),
                        who: o.name.clone(),
                    });
                    at += n;
                    u += 1;
                }
            }
            Protocol::Ddp => out.push(Piece {
                start: o.start as u64,
                channels,
                kind: Kind::Ddp,
                addr,
                who: o.name.clone(),
            }),
            Protocol::Bigpacket => {}
        }
    }
    out
}

fn int(
    v: &Value,
    key: &str,
    at: &str,
    lo: i64,
    hi: i64,
    default: Option<i64>,
) -> Result<i64, String> {
    match v.get(key) {
        None | Some(Value::Null) => {
            default.ok_or_else(|| format!("{at}.{key}: missing (a number from {lo} to {hi})"))
        }
        Some(x) => match x.as_i64() {
            Some(n) if (lo..=hi).contains(&n) => Ok(n),
            _ => Err(format!(
                "{at}.{key}: {x} is not a whole number from {lo} to {hi}"
            )),
        },
    }
}

/// Checks a posted table and returns its active universe outputs as pieces (sACN
/// expanded per universe). Errors name the entry and key, e.g.
/// `channelOutputs[0].universes[3].startChannel: ...`.
pub fn posted_pieces(v: &Value) -> Result<Vec<Piece>, String> {
    let Some(list) = v.get("channelOutputs") else {
        return Err("`channelOutputs`: missing; post FPP's universe output table".into());
    };
    let Some(list) = list.as_array() else {
        return Err("`channelOutputs`: not a list".into());
    };
    let mut out = Vec::new();
    let mut count = 0usize;
    for (i, co) in list.iter().enumerate() {
        let at = format!("channelOutputs[{i}]");
        if !co.is_object() {
            return Err(format!("{at}: not an object"));
        }
        if co.get("type").and_then(Value::as_str) != Some("universes") {
            continue;
        }
        let enabled = int(co, "enabled", &at, 0, 1, Some(1))? == 1;
        let Some(us) = co.get("universes") else {
            continue;
        };
        let Some(us) = us.as_array() else {
            return Err(format!("{at}.universes: not a list"));
        };
        for (j, u) in us.iter().enumerate() {
            let at = format!("{at}.universes[{j}]");
            if !u.is_object() {
                return Err(format!("{at}: not an object"));
            }
            let start = int(u, "startChannel", &at, 1, MAX_CHANNEL as i64, None)? as u64;
            let n = int(u, "channelCount", &at, 0, MAX_CHANNEL as i64, None)? as u64;
            let kind = int(u, "type", &at, 0, 255, None)?;
            let ucount = int(u, "universeCount", &at, 1, 64_000, Some(1))? as u64;
            let id = int(u, "id", &at, 0, 65_535, Some(0))? as u64;
            let active = int(u, "active", &at, 0, 1, Some(1))? == 1;
            let addr = match u.get("address") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) if s.len() <= 255 => s.clone(),
                Some(x) => return Err(format!("{at}.address: {x} is not a host name or address")),
            };
            if start - 1 + n * ucount > MAX_CHANNEL {
                return Err(format!("{at}: channels past {MAX_CHANNEL}"));
            }
            // Counted as universes, not entries: one entry may stand for 64,000.
            count += ucount as usize;
            if count > MAX_UNIVERSES {
                return Err(format!(
                    "{at}: more than {MAX_UNIVERSES} universes in the table"
                ));
            }
            if !(enabled && active) || n == 0 {
                continue;
            }
            let who = u
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            match kind {
                0 | 1 => {
                    for k in 0..ucount {
                        out.push(Piece {
                            start: start - 1 + k * n,
                            channels: n,
                            kind: Kind::Sacn((id + k) as u32),
                            addr: if kind == 0 {
                                String::new()
                            } else {
                                addr.clone()
                            },
                            who: who.clone(),
                        });
                    }
                }
                4 | 5 => out.push(Piece {
                    start: start - 1,
                    channels: n * ucount,
                    kind: Kind::Ddp,
                    addr,
                    who,
                }),
                // Art-Net, KiNet, Twinkly: pfx sends none of these; each is a
                // disagreement if it claims channels.
                _ => out.push(Piece {
                    start: start - 1,
                    channels: n * ucount,
                    kind: Kind::Ddp,
                    addr: format!("{addr} (FPP output type {kind}, which pfx does not send)"),
                    who,
                }),
            }
        }
    }
    Ok(out)
}

/// Channel numbers as xLights shows them (1-based, inclusive).
fn span(p: &Piece) -> String {
    format!("channels {}-{}", p.start + 1, p.start + p.channels)
}

fn dest(p: &Piece) -> String {
    if p.addr.is_empty() {
        format!("{} multicast", p.kind.text())
    } else {
        format!("{} to {}", p.kind.text(), p.addr)
    }
}

/// Where xLights' table (`posted`) and the unit's outputs (`ours`) disagree, one line
/// each, in channel order; empty when they agree.
pub fn disagreements(ours: &[Piece], posted: &[Piece]) -> Vec<String> {
    let mut out = Vec::new();
    for o in ours {
        match posted.iter().find(|p| p.start == o.start) {
            None => out.push(format!(
                "pfx output `{}` sends {} ({}); xLights' table has nothing starting there",
                o.who,
                span(o),
                dest(o)
            )),
            Some(p) if p.channels != o.channels || p.kind != o.kind || p.addr != o.addr => out
                .push(format!(
                    "pfx output `{}` sends {} ({}); xLights' table says {} ({}{})",
                    o.who,
                    span(o),
                    dest(o),
                    span(p),
                    dest(p),
                    if p.who.is_empty() {
                        String::new()
                    } else {
                        format!(", `{}`", p.who)
                    }
                )),
            Some(_) => {}
        }
    }
    for p in posted {
        if !ours.iter().any(|o| o.start == p.start) {
            out.push(format!(
                "xLights' table sends {} ({}{}); no pfx output does",
                span(p),
                dest(p),
                if p.who.is_empty() {
                    String::new()
                } else {
                    format!(", `{}`", p.who)
                }
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::DeviceProfile;

    fn out(name: &str, yaml: &str, start: usize) -> ResolvedOutput {
        let profile =
            DeviceProfile::from_str(yaml, std::path::Path::new("<test>")).expect("profile");
        ResolvedOutput {
            name: name.into(),
            destination: profile.destination,
            start,
            profile,
        }
    }

    fn outputs() -> Vec<ResolvedOutput> {
        vec![
            out(
                "a",
                "name: a\nprotocol: ddp\npixels: 300\npixel_format: rgb8\ncolor_order: rgb\ndestination: 10.0.0.5:4048\n",
                0,
            ),
            out(
                "b",
                "name: b\nprotocol: sacn\npixels: 340\npixel_format: rgb8\ncolor_order: rgb\ndestination: 239.255.0.7:5568\nsacn:\n  first_universe: 7\n",
                900,
            ),
        ]
    }

    #[test]
    fn our_outputs_in_fpps_layout() {
        let v = universe_outputs(&outputs());
        let u = &v["channelOutputs"][0]["universes"];
        assert_eq!(v["channelOutputs"][0]["type"], "universes");
        assert_eq!(u[0]["type"], 5);
        assert_eq!(u[0]["startChannel"], 1);
        assert_eq!(u[0]["channelCount"], 900);
        assert_eq!(u[0]["address"], "10.0.0.5");
        assert_eq!(u[1]["type"], 0);
        assert_eq!(u[1]["id"], 7);
        assert_eq!(u[1]["startChannel"], 901);
        assert_eq!(
            (u[1]["channelCount"].clone(), u[1]["universeCount"].clone()),
            (json!(510), json!(2))
        );
        // What we serve reads back as the same pieces: the table agrees with itself.
        let ours = our_pieces(&outputs());
        let posted = posted_pieces(&v).expect("valid");
        assert_eq!(disagreements(&ours, &posted), Vec::<String>::new());
    }

    #[test]
    fn a_table_that_differs_is_named_line_by_line() {
        let ours = our_pieces(&outputs());
        let posted = posted_pieces(&json!({"channelOutputs": [{"type": "universes", "enabled": 1, "universes": [
            {"active": 1, "description": "Pole A", "id": 1, "startChannel": 1, "channelCount": 900, "type": 5, "address": "10.0.0.6"},
            {"active": 1, "description": "Pole B", "id": 7, "startChannel": 901, "channelCount": 510, "universeCount": 1, "type": 0, "address": ""},
            {"active": 1, "description": "Tree", "id": 20, "startChannel": 5001, "channelCount": 510, "type": 1, "address": "10.0.0.9"},
            {"active": 0, "description": "Off", "id": 30, "startChannel": 9001, "channelCount": 510, "type": 1, "address": "10.0.0.10"}
        ]}]}))
        .expect("valid");
        let d = disagreements(&ours, &posted);
        assert_eq!(d.len(), 3, "{d:#?}");
        assert!(d[0].contains("`a` sends channels 1-900 (DDP to 10.0.0.5); xLights' table says channels 1-900 (DDP to 10.0.0.6, `Pole A`)"), "{}", d[0]);
        assert!(d[1].contains("`b` sends channels 1411-1920 (sACN universe 8 multicast); xLights' table has nothing"), "{}", d[1]);
        assert!(d[2].contains("xLights' table sends channels 5001-5510 (sACN universe 20 to 10.0.0.9, `Tree`); no pfx output does"), "{}", d[2]);
    }

    #[test]
    fn hostile_tables_are_refused_with_the_place() {
        for (v, want) in [
            (json!([1]), "`channelOutputs`: missing"),
            (json!({"channelOutputs": 3}), "not a list"),
            (
                json!({"channelOutputs": [{"type": "universes", "universes": [{"startChannel": 0, "channelCount": 1, "type": 0}]}]}),
                "channelOutputs[0].universes[0].startChannel",
            ),
            (
                json!({"channelOutputs": [{"type": "universes", "universes": [{"startChannel": 1, "channelCount": -5, "type": 0}]}]}),
                ".channelCount",
            ),
            (
                json!({"channelOutputs": [{"type": "universes", "universes": [{"startChannel": 1, "channelCount": 2000, "universeCount": 64000, "type": 0}]}]}),
                "channels past",
            ),
            (
                json!({"channelOutputs": [{"type": "universes", "universes": [
                    {"startChannel": 1, "channelCount": 1, "universeCount": 60000, "type": 0},
                    {"startChannel": 1, "channelCount": 1, "universeCount": 60000, "type": 0}]}]}),
                "universes[1]: more than 65536 universes",
            ),
            (
                json!({"channelOutputs": [{"type": "universes", "universes": [{"startChannel": 1, "channelCount": 5, "type": 1, "address": 7}]}]}),
                ".address",
            ),
            (
                json!({"channelOutputs": [{"type": "universes", "universes": "x"}]}),
                "universes: not a list",
            ),
        ] {
            let e = match posted_pieces(&v) {
                Ok(p) => panic!("accepted, {} pieces (want {want})", p.len()),
                Err(e) => e,
            };
            assert!(e.contains(want), "{e} (want {want})");
        }
    }
}
