//! Device profiles: one YAML file per pole generation (see `docs/profiles.md`).

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::wire::{FrameShape, bigpacket, ddp, sacn};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Bigpacket,
    Sacn,
    Ddp,
}

impl Protocol {
    pub fn default_port(self) -> u16 {
        match self {
            Protocol::Bigpacket => bigpacket::PORT,
            Protocol::Sacn => sacn::PORT,
            Protocol::Ddp => ddp::PORT,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PixelFormat {
    Rgb8,
    Rgbw8,
}

impl PixelFormat {
    pub fn bytes_per_pixel(self) -> usize {
        match self {
            PixelFormat::Rgb8 => 3,
            PixelFormat::Rgbw8 => 4,
        }
    }
}

/// Order in which a pole expects the colour components on the wire. The sequence always
/// holds R, G, B (and W) in that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColorOrder {
    Rgb,
    Rbg,
    Grb,
    Gbr,
    Brg,
    Bgr,
}

impl ColorOrder {
    /// For each wire position, the index of the source component (0 = R, 1 = G, 2 = B).
    pub fn wire_to_source(self) -> [usize; 3] {
        match self {
            ColorOrder::Rgb => [0, 1, 2],
            ColorOrder::Rbg => [0, 2, 1],
            ColorOrder::Grb => [1, 0, 2],
            ColorOrder::Gbr => [1, 2, 0],
            ColorOrder::Brg => [2, 0, 1],
            ColorOrder::Bgr => [2, 1, 0],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SacnOptions {
    /// First universe this pole listens on (1..=63999).
    #[serde(default = "default_first_universe")]
    pub first_universe: u16,
    /// Channels carried per universe. 510 keeps whole RGB pixels in each universe.
    #[serde(default = "default_universe_size")]
    pub universe_size: u16,
    /// sACN priority, 0..=200.
    #[serde(default = "default_priority")]
    pub priority: u8,
    /// Send E1.31 universe sync on this universe after each frame.
    #[serde(default)]
    pub sync_universe: Option<u16>,
}

fn default_first_universe() -> u16 {
    1
}
fn default_universe_size() -> u16 {
    510
}
fn default_priority() -> u8 {
    100
}

impl Default for SacnOptions {
    fn default() -> Self {
        SacnOptions {
            first_universe: default_first_universe(),
            universe_size: default_universe_size(),
            priority: default_priority(),
            sync_universe: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DdpOptions {
    /// DDP data-type byte. 0x0B is 8-bit RGB per the spec (bits per element, not per pixel).
    #[serde(default = "default_ddp_data_type")]
    pub data_type: u8,
    /// DDP destination id; 1 is the default output.
    #[serde(default = "default_ddp_id")]
    pub destination_id: u8,
}

fn default_ddp_data_type() -> u8 {
    0x0B
}
fn default_ddp_id() -> u8 {
    1
}

impl Default for DdpOptions {
    fn default() -> Self {
        DdpOptions {
            data_type: default_ddp_data_type(),
            destination_id: default_ddp_id(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize, Default)]
#[serde(deny_unknown_fields)]
pub struct BigPacketOptions {
    /// Pole id carried in every datagram, so one receiver can tell senders apart.
    #[serde(default)]
    pub pole_id: u16,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceProfile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub protocol: Protocol,
    /// Pixels on the pole.
    pub pixels: u32,
    pub pixel_format: PixelFormat,
    pub color_order: ColorOrder,
    /// Where frames go unless the show config overrides it (`ip:port`; multicast, unicast or
    /// broadcast as the protocol allows).
    pub destination: SocketAddr,
    #[serde(default)]
    pub sacn: Option<SacnOptions>,
    #[serde(default)]
    pub ddp: Option<DdpOptions>,
    #[serde(default)]
    pub bigpacket: Option<BigPacketOptions>,
}

impl DeviceProfile {
    pub fn load(path: &Path) -> Result<DeviceProfile, ConfigError> {
        Self::from_str(&super::yaml::read_text(path)?, path)
    }

    pub fn from_str(text: &str, origin: &Path) -> Result<DeviceProfile, ConfigError> {
        let p: DeviceProfile = super::from_yaml_str(text, origin)?;
        p.validate(origin).map_err(|e| e.located(text, origin))?;
        Ok(p)
    }

    /// Bytes of channel data one frame of this pole takes.
    pub fn channels(&self) -> usize {
        self.pixels as usize * self.pixel_format.bytes_per_pixel()
    }

    /// How this pole's datagrams look on the wire, by its protocol's rules (`wire`).
    pub fn frame_shape(&self) -> FrameShape {
        let channels = self.channels();
        match self.protocol {
            Protocol::Sacn => {
                let o = self.sacn_options();
                sacn::frame_shape(channels, o.universe_size, o.sync_universe.is_some())
            }
            Protocol::Ddp => ddp::frame_shape(channels),
            Protocol::Bigpacket => bigpacket::frame_shape(channels),
        }
    }

    /// UDP payload sizes of the datagrams one frame of this pole takes, in sending order.
    pub fn frame_datagrams(&self) -> Vec<usize> {
        self.frame_shape().datagrams
    }

    /// The largest datagram this pole's output ever sends (frames, and for sACN the
    /// universe-discovery pages every 10 s).
    pub fn largest_datagram(&self) -> usize {
        self.frame_shape().largest_datagram()
    }

    pub fn sacn_options(&self) -> SacnOptions {
        self.sacn.clone().unwrap_or_default()
    }

    pub fn ddp_options(&self) -> DdpOptions {
        self.ddp.clone().unwrap_or_default()
    }

    pub fn bigpacket_options(&self) -> BigPacketOptions {
        self.bigpacket.clone().unwrap_or_default()
    }

    fn validate(&self, path: &Path) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::invalid(path, m));
        if self.pixels == 0 {
            return bad("pixels: must be at least 1".into());
        }
        let sections = [
            ("sacn", self.sacn.is_some(), Protocol::Sacn),
            ("ddp", self.ddp.is_some(), Protocol::Ddp),
            ("bigpacket", self.bigpacket.is_some(), Protocol::Bigpacket),
        ];
        for (key, present, proto) in sections {
            if present && proto != self.protocol {
                return bad(format!(
                    "{key}: options given for a profile whose protocol is {:?}; remove the `{key}:` section or change `protocol:`",
                    self.protocol
                ));
            }
        }
        match self.protocol {
            Protocol::Sacn => {
                let o = self.sacn_options();
                if !(1..=63999).contains(&o.first_universe) {
                    return bad(format!(
                        "sacn.first_universe: {} is outside 1..=63999",
                        o.first_universe
                    ));
                }
                if !(1..=512).contains(&o.universe_size) {
                    return bad(format!(
                        "sacn.universe_size: {} is outside 1..=512",
                        o.universe_size
                    ));
                }
                if o.priority > 200 {
                    return bad(format!(
                        "sacn.priority: {} is above the E1.31 maximum of 200",
                        o.priority
                    ));
                }
                let universes = sacn::universes(self.channels(), o.universe_size);
                if o.first_universe as usize + universes - 1 > 63999 {
                    return bad(format!(
                        "pixels: {} pixels need {universes} universes from {}, past universe 63999",
                        self.pixels, o.first_universe
                    ));
                }
                if let Some(s) = o.sync_universe
                    && !(1..=63999).contains(&s)
                {
                    return bad(format!("sacn.sync_universe: {s} is outside 1..=63999"));
                }
            }
            Protocol::Ddp => {
                if self.ddp_options().destination_id == 0 {
                    return bad(
                        "ddp.destination_id: 0 is reserved by the DDP spec; use 1 (default output)"
                            .into(),
                    );
                }
            }
            Protocol::Bigpacket => {
                let max = bigpacket::MAX_PAYLOAD;
                if self.channels() > max {
                    return bad(format!(
                        "pixels: {} pixels are {} bytes, more than one bigPacket datagram carries ({max})",
                        self.pixels,
                        self.channels()
                    ));
                }
            }
        }
        Ok(())
    }
}
