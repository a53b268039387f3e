//! Subcommands of `pfx-player`, one module each.
