#!/usr/bin/env bash
# Unit and integration tests of the Rust workspace, plus fmt, clippy and the module
# dependency check (no import cycles and no forbidden edge, scripts/check-cycles, with
# its self-test) and docs/architecture.md against the tree (scripts/check-architecture).
#
# A test that cannot run its real parts here (root, an IPv6 loopback, a tool) prints a
# line starting "skipped:" and returns, which cargo counts as a pass. This suite reads
# every test's output (`--show-output`) and lists those tests as SKIPPED, by name, so none
# passes silently; run as root (as CI does), a test skipped for want of root fails it.
set -uo pipefail
top="${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
cd "$top"
check "check-cycles: no import cycle, no forbidden edge" python3 scripts/check-cycles
# Every forbidden-edge rule broken once in a copy of the tree, and caught.
check "check-cycles --self-test: each rule broken once is caught" python3 scripts/check-cycles --self-test
check "check-architecture: docs/architecture.md matches the tree" python3 scripts/check-architecture
check "cargo fmt --check" cargo fmt --all -- --check
check "cargo clippy -D warnings" cargo clippy --workspace --all-targets --locked -- -D warnings
log=/tmp/pfx-cargo-test.log
rc=0
cargo test --workspace --locked -- --show-output > "$log" 2>&1 || rc=$?
# The progress and the verdicts, not every passing test's output (that stays in $log).
grep -E '^\s+Running |^test result:|^test .* FAILED|^error' "$log" || true
if [ "$rc" != 0 ]; then
  echo "--- cargo test failed (rc $rc); the end of $log:"
  tail -150 "$log"
  die "cargo test --workspace (rc $rc)"
fi
ok "cargo test --workspace"
judge "the skipped tests read from the log" python3 - "$log" "$(id -u)" <<'PY'
import re, sys
log, uid = open(sys.argv[1], errors="replace").read().splitlines(), sys.argv[2]
skips, test = [], None
for line in log:
    m = re.match(r"^---- (\S+) stdout ----$", line)
    if m:
        test = m.group(1)
    elif line.startswith("skipped:") and test:
        skips.append((test, line))
for t, why in skips:
    print(f"SKIPPED (not passed): {t}: {why}")
root_skips = [t for t, why in skips if "root" in why]
print(f"cargo test: {len(skips)} tests skipped at run time ({len(root_skips)} for want of root)")
if uid == "0":
    print(("ok" if not root_skips else "fail") + "\trun as root, no test skipped for want of root"
          + ("" if not root_skips else ": " + ", ".join(root_skips)))
PY
finish 10-rust
