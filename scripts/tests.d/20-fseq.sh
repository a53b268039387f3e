#!/usr/bin/env bash
# FSEQ reader against an independent Python decoder (zstandard + zlib, written from the
# format in docs/formats.md, not from the Rust reader): every frame of every file of the
# generated corpus (player/tests/common/fseq_writer.rs), plus v1/zlib/sparse/multi-frame
# files the Python side writes itself from their frames. Needs nothing outside the
# repository; 21-fseq-real.sh runs the same checks on real xLights exports. ~15 s.
set -uo pipefail
top=${PFX_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top"
# shellcheck source=../lib/check.sh
. "$top/scripts/lib/check.sh"
# shellcheck source=../lib/player-bin.sh
. "$top/scripts/lib/player-bin.sh"
python3 -c 'import zstandard' || die "python3 zstandard missing (scripts/deps/fseq.pip)"
player_bin
work=$(mktemp -d /tmp/pfx-fseq-ref.XXXXXX)
trap 'rm -rf "$work"' EXIT

# fseq_reference.py prints one line per check, "ok   WHAT" or "FAIL WHAT": each is one of
# this suite's checks; its exit status must agree with them.
reference() {
  judge fseq_reference.py python3 "$top/player/tests/py/fseq_reference.py" "$@"
}

# The corpus is written by the same code the Rust tests read it with (an ignored test).
PFX_FSEQ_CORPUS_DIR="$work/corpus" cargo test -q -p pfx-player --locked --test fseq -- \
  --ignored --exact write_corpus_to_dir > "$work/write.log" 2>&1 ||
  { cat "$work/write.log"; die "writing the generated FSEQ corpus"; }
n=$(find "$work/corpus" -name '*.fseq' | wc -l)
check "the corpus writer wrote .fseq files ($n in $work/corpus)" [ "$n" -gt 0 ]
reference "$bin" "$work/corpus" "$work/reencoded"
finish 20-fseq
