//! What plays and how shows reach a unit: the `show` section of `/profile`, and the
//! agent's answers to the fleet's `show ...` verbs (docs/show-store.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where the playing show came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShowSource {
    /// The active show of the store on the data partition.
    Store,
    /// The `--config` file (the image's built-in show), because the store had none to give.
    #[default]
    Config,
}

/// `/profile`'s `show`: what the player plays, since when, and why it is not the store's
/// show when it is not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShowInfo {
    /// The store's name for the show; for the config show, its file name.
    pub name: String,
    /// The store's show id (16 hex digits); None for the config show.
    pub id: Option<String>,
    pub source: ShowSource,
    /// When this show started playing (Unix ms).
    pub since_unix_ms: Option<u64>,
    /// Why the player fell back to the config show (None when it plays the store's).
    pub reason: Option<String>,
}

/// One file a push wants on the unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WantedFile {
    pub hash: String,
    pub size: u64,
}

/// A wanted file the unit lacks, and how much of it is staged already.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingFile {
    pub hash: String,
    pub size: u64,
    /// Send from here: the unit keeps what an interrupted transfer delivered.
    pub offset: u64,
}

/// `show missing`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MissingReport {
    pub unit: String,
    pub missing: Vec<MissingFile>,
    /// Bytes the store may still take (free space minus its reserve).
    pub free_bytes: u64,
    pub errors: Vec<String>,
}

/// `show put HASH SIZE OFFSET LEN`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PutReport {
    pub unit: String,
    pub hash: String,
    /// Bytes of this file the unit holds now (staged, or all of it once stored).
    pub have: u64,
    pub size: u64,
    /// Bytes this call received.
    pub received: u64,
    /// The file is complete, its hash checked, and it is in the store.
    pub stored: bool,
    pub errors: Vec<String>,
}

/// `show activate`'s input: the show to make and switch to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActivateRequest {
    pub name: String,
    pub show_yaml: String,
    /// File name in the show → sha256.
    pub files: BTreeMap<String, String>,
}

/// The store's active show as the unit reads it back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ActiveShowInfo {
    pub id: String,
    pub name: String,
    pub files: BTreeMap<String, String>,
    pub since_unix_ms: u64,
}

/// `show activate` and `show status`: the unit's own readback.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShowReadback {
    pub unit: String,
    /// activate: the new show is active and the player says it plays it; status: the
    /// player plays the store's active show.
    pub verified: bool,
    pub message: String,
    /// The show `activate` was asked for (its id), None for `status`.
    pub requested: Option<String>,
    /// The store's active show.
    pub active: Option<ActiveShowInfo>,
    /// What the player's `/profile` says it plays (None when it did not answer).
    pub player: Option<ShowInfo>,
    pub read_at_unix_ms: u64,
    pub errors: Vec<String>,
    /// `status`: the live action the player holds (its `/profile`'s `control`), when it
    /// said one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<crate::control::ControlState>,
}
