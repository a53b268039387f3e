//! pfx-api: what crosses a process boundary, typed once.
//!
//! The player serves these types and the fleet and agent read them back, so a renamed
//! field breaks the build or a golden-JSON test rather than a unit in the field.
//!
//! - [`profile`]: the `/profile` document;
//! - [`nic`]: `pfx-player nic ... --json` (and the `nic` object of `/profile`);
//! - [`agent`]: the agent's reports;
//! - [`control`]: live actions on a show night (blackout, play, test, ...) and their answers;
//! - [`show`]: `/profile`'s `show` section and the agent's show-push answers;
//! - [`update`]: the agent's `update ...` answers, the health commit, a bundle's sidecar;
//! - [`http`]: the one HTTP/1.1 client both sides use;
//! - [`exit`]: how the four binaries print errors and which exit codes they use.
//!
//! The golden files in `tests/golden/` are the wire format: the player's and the fleet's
//! tests produce them from the real serializers and read them back.

pub mod agent;
pub mod control;
pub mod exit;
pub mod http;
pub mod nic;
pub mod profile;
pub mod show;
pub mod update;

#[doc(hidden)]
pub mod golden;
