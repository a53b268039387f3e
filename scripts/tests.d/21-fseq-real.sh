#!/usr/bin/env bash
# Optional: the FSEQ checks on real xLights exports, when $PFX_FSEQ_FIXTURES names a
# folder of them (the repository holds none and looks nowhere outside itself). The
# repository's own tests use the generated corpus, whose shapes were taken from such
# exports; this suite checks them against the real thing:
#   - every frame of every file against the independent Python decoder (as 20-fseq.sh);
#   - the ignored `real_exports_*` Rust tests: header facts, re-encodings, fuzz seeds,
#     and the sACN end-to-end run on dusk-to-dawn.fseq.
# Without such a folder it says so and exits 77 (test-all counts that as skipped).
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# shellcheck source=../lib/player-bin.sh
. "$top/scripts/lib/player-bin.sh"
[ -n "${PFX_FSEQ_FIXTURES:-}" ] \
  || skip "no real xLights exports beside the checkout (set PFX_FSEQ_FIXTURES to a folder of them)"
dir=$PFX_FSEQ_FIXTURES
[ -d "$dir" ] || die "PFX_FSEQ_FIXTURES=$dir is not a directory (unset it to skip this suite)"
dir=$(cd "$dir" && pwd)
n=$(find "$dir" -maxdepth 1 -name '*.fseq' | wc -l)
[ "$n" -gt 0 ] || die "no .fseq files in $dir"
echo "real xLights exports: $n files in $dir"
python3 -c 'import zstandard' || die "python3 zstandard missing (scripts/deps/fseq.pip)"
player_bin
work=$(mktemp -d /tmp/pfx-fseq-real.XXXXXX)
trap 'rm -rf "$work"' EXIT

# fseq_reference.py prints one line per check, "ok   WHAT" or "FAIL WHAT" (as in 20-fseq).
judge fseq_reference.py python3 "$top/player/tests/py/fseq_reference.py" "$bin" "$dir" "$work"

PFX_FSEQ_FIXTURES="$dir" cargo test -p pfx-player --locked --test fseq --test fseq_fuzz \
  --test e2e_sacn -- --ignored real_exports > "$work/cargo.log" 2>&1
rc=$?
cat "$work/cargo.log"
check "cargo test --ignored real_exports exits 0 (exit $rc)" [ "$rc" = 0 ]
# A renamed test would otherwise pass here by running nothing.
ran=$(grep -c '^test real_exports.* \.\.\. ok$' "$work/cargo.log")
check "the 4 real_exports_* Rust tests ran and passed ($ran passed)" [ "$ran" -ge 4 ]
finish 21-fseq-real
