#!/usr/bin/env bash
# Unit and integration tests of the Rust workspace, plus fmt and clippy.
set -euo pipefail
cd "$PFX_TOP"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked 2>&1 | tee /tmp/pfx-cargo-test.log
