#!/usr/bin/env bash
# FSEQ reader against an independent Python decoder (zstandard + zlib, written from
# shared/notes/formats.md): every frame of every fixture, plus v1/zlib/sparse/multi-frame
# files the Python side writes itself. ~10 s.
set -euo pipefail
cd "$PFX_TOP"
# CI has shared/ beside the checkout; worktrees one level further up; else PFX_FSEQ_FIXTURES.
fixtures="${PFX_FSEQ_FIXTURES:-$PFX_TOP/../shared/fixtures/fseq}"
[ -d "$fixtures" ] || [ -n "${PFX_FSEQ_FIXTURES:-}" ] || fixtures="$PFX_TOP/../../shared/fixtures/fseq"
if [ ! -d "$fixtures" ]; then
  echo "FAILED: fixtures not found at $fixtures"
  exit 1
fi
python3 -c 'import zstandard' || { echo "FAILED: python3 zstandard missing (scripts/deps/fseq.pip)"; exit 1; }
bin="$PFX_TOP/target/release/pfx-player"
[ -x "$bin" ] || bin="$PFX_TOP/target/debug/pfx-player"
[ -x "$bin" ] || cargo build -p pfx-player --locked
[ -x "$bin" ] || bin="$PFX_TOP/target/debug/pfx-player"
work=$(mktemp -d /tmp/pfx-fseq-ref.XXXXXX)
trap 'rm -rf "$work"' EXIT
python3 "$PFX_TOP/player/tests/py/fseq_reference.py" "$bin" "$fixtures" "$work"
