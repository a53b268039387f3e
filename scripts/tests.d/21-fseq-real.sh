#!/usr/bin/env bash
# Optional: the FSEQ checks on real xLights exports, when $PFX_FSEQ_FIXTURES names a
# folder of them (the repository holds none and looks nowhere outside itself). The
# repository's own tests use the generated corpus, whose shapes were taken from such
# exports; this suite checks them against the real thing:
#   - every frame of every file against the independent Python decoder (as 20-fseq.sh);
#   - the ignored `real_exports_*` Rust tests: header facts, re-encodings, fuzz seeds,
#     and the sACN end-to-end run on dusk-to-dawn.fseq.
# Without such a folder it says so and exits 77 (test-all counts that as skipped).
set -euo pipefail
cd "$PFX_TOP"
if [ -n "${PFX_FSEQ_FIXTURES:-}" ]; then
  dir=$PFX_FSEQ_FIXTURES
  [ -d "$dir" ] || { echo "FAILED: PFX_FSEQ_FIXTURES=$dir is not a directory (unset it to skip this suite)"; exit 1; }
else
  echo "skipped: no real xLights exports beside the checkout (set PFX_FSEQ_FIXTURES to a folder of them)"
  exit 77
fi
dir=$(cd "$dir" && pwd)
n=$(find "$dir" -maxdepth 1 -name '*.fseq' | wc -l)
[ "$n" -gt 0 ] || { echo "FAILED: no .fseq files in $dir"; exit 1; }
echo "real xLights exports: $n files in $dir"
python3 -c 'import zstandard' || { echo "FAILED: python3 zstandard missing (scripts/deps/fseq.pip)"; exit 1; }
. "$PFX_TOP/scripts/lib/player-bin.sh"
player_bin
work=$(mktemp -d /tmp/pfx-fseq-real.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$PFX_TOP/player/tests/py/fseq_reference.py" "$bin" "$dir" "$work"
PFX_FSEQ_FIXTURES="$dir" cargo test -p pfx-player --locked --test fseq --test fseq_fuzz \
  --test e2e_sacn -- --ignored real_exports 2>&1 | tee "$work/cargo.log"
# A renamed test would otherwise pass here by running nothing.
ran=$(grep -c '^test real_exports.* \.\.\. ok$' "$work/cargo.log" || true)
echo "real-export Rust tests passed: $ran"
[ "$ran" -ge 4 ] || { echo "FAILED: expected 4 real_exports_* tests, $ran passed"; exit 1; }
