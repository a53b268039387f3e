//! Show configuration and device profiles, read from YAML.
//!
//! Every error a user can cause names the file, and where the YAML parser knows it, the
//! line and column.

pub mod profile;
pub mod show;
mod yaml;

pub use profile::{ColorOrder, DeviceProfile, PixelFormat, Protocol};
pub use show::{ContentItem, OutputConfig, ShowConfig};
pub use yaml::{ConfigError, from_yaml_file, from_yaml_str};
