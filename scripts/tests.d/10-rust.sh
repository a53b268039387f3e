#!/usr/bin/env bash
# Unit and integration tests of the Rust workspace, plus fmt, clippy and the module
# dependency check (no import cycles and no forbidden edge, scripts/check-cycles, with
# its self-test) and docs/architecture.md against the tree (scripts/check-architecture).
set -euo pipefail
cd "$PFX_TOP"
python3 scripts/check-cycles
# Every forbidden-edge rule broken once in a copy of the tree, and caught.
python3 scripts/check-cycles --self-test
python3 scripts/check-architecture
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked 2>&1 | tee /tmp/pfx-cargo-test.log
