//! Absolute-deadline frame clock.
