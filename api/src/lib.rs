//! pfx-api: what crosses a process boundary, typed once.
//!
//! The player serves these types and the fleet and agent read them back, so a renamed
//! field breaks the build or a golden-JSON test rather than a unit in the field.

#[doc(hidden)]
pub mod golden;
