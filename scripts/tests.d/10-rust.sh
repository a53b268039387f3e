#!/usr/bin/env bash
# Unit and integration tests of the Rust workspace, plus fmt, clippy and the module
# dependency check (no import cycles, scripts/check-cycles) and docs/architecture.md
# against the tree (scripts/check-architecture).
set -euo pipefail
cd "$PFX_TOP"
python3 scripts/check-cycles
python3 scripts/check-architecture
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked 2>&1 | tee /tmp/pfx-cargo-test.log
