#!/usr/bin/env bash
# FSEQ reader against an independent Python decoder (zstandard + zlib, written from the
# format in docs/formats.md, not from the Rust reader): every frame of every file of the
# generated corpus (player/tests/common/fseq_writer.rs), plus v1/zlib/sparse/multi-frame
# files the Python side writes itself from their frames. Needs nothing outside the
# repository; 21-fseq-real.sh runs the same checks on real xLights exports. ~15 s.
set -euo pipefail
cd "$PFX_TOP"
python3 -c 'import zstandard' || { echo "FAILED: python3 zstandard missing (scripts/deps/fseq.pip)"; exit 1; }
. "$PFX_TOP/scripts/lib/player-bin.sh"
player_bin
work=$(mktemp -d /tmp/pfx-fseq-ref.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The corpus is written by the same code the Rust tests read it with (an ignored test).
PFX_FSEQ_CORPUS_DIR="$work/corpus" cargo test -q -p pfx-player --locked --test fseq -- \
  --ignored --exact write_corpus_to_dir >"$work/write.log" 2>&1 ||
  { cat "$work/write.log"; echo "FAILED: writing the generated FSEQ corpus"; exit 1; }
n=$(find "$work/corpus" -name '*.fseq' | wc -l)
echo "generated corpus: $n files in $work/corpus"
[ "$n" -gt 0 ] || { echo "FAILED: the corpus writer wrote no .fseq files"; exit 1; }
python3 "$PFX_TOP/player/tests/py/fseq_reference.py" "$bin" "$work/corpus" "$work/reencoded"
