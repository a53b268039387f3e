//! The render thread.
