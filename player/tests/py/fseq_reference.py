#!/usr/bin/env python3
"""Independent FSEQ decoder, written from the format as docs/formats.md describes it (not
from the Rust reader), checked frame by frame against `pfx-player seq dump` / `seq frame`.

Also writes its own v1, zlib, sparse and multi-zstd-frame files from each input file's
frames (an independent writer) and checks the Rust reader returns the same frames.

DIR is the generated corpus (scripts/tests.d/20-fseq.sh) or a folder of real xLights
exports (scripts/tests.d/21-fseq-real.sh).

usage: fseq_reference.py PFX_PLAYER_BINARY DIR [WORK_DIR]
Prints one line per check and "fseq reference: P passed, F failed"; exit 1 on any failure.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import zstandard


def zstd_decompress_all(data):
    """A block may hold several zstd frames back to back; frames lack a content size."""
    out = bytearray()
    while data:
        d = zstandard.ZstdDecompressor().decompressobj()
        out += d.decompress(data)
        if not d.eof:
            raise ValueError("zstd frame truncated")
        data = d.unused_data
    return bytes(out)


def parse(buf):
    magic = buf[0:4]
    assert magic in (b"PSEQ", b"FSEQ"), magic
    data_off, minor, major, hdr_len = struct.unpack_from("<HBBH", buf, 4)
    chans, frames, step, _flags = struct.unpack_from("<IIBB", buf, 10)
    h = dict(major=major, minor=minor, data_off=data_off, chans=chans, frames=frames,
             step=step, comp=0, blocks=[], ranges=[], vars={}, codes=[], entries=0)
    if major == 1:
        var_at = 28
    else:
        b20, b21, nranges = buf[20], buf[21], buf[22]
        h["comp"] = b20 & 0x0F
        nblocks = ((b20 & 0xF0) << 4) | b21
        h["entries"] = nblocks
        at = 32
        off = data_off
        for _ in range(nblocks):
            first, ln = struct.unpack_from("<II", buf, at)
            at += 8
            if ln:
                h["blocks"].append((first, off, ln))
                off += ln
        for _ in range(nranges):
            s = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16
            c = buf[at + 3] | buf[at + 4] << 8 | buf[at + 5] << 16
            h["ranges"].append((s, c))
            at += 6
        var_at = hdr_len
    i = var_at
    while i + 4 <= data_off:
        ln = struct.unpack_from("<H", buf, i)[0]
        if ln == 0:
            break
        code = buf[i + 2:i + 4].decode("latin-1")
        h["vars"][code] = buf[i + 4:i + max(ln, 4)]
        h["codes"].append(code)
        i += max(ln, 4)
    return h


def expanded_len(h):
    if not h["ranges"]:
        return h["chans"]
    return max(s + c for s, c in h["ranges"])


def expand(h, stored):
    if not h["ranges"]:
        return stored
    out = bytearray(expanded_len(h))
    at = 0
    for s, c in h["ranges"]:
        out[s:s + c] = stored[at:at + c]
        at += c
    return bytes(out)


def frames_of(buf):
    """All frames, sparse expanded, decoded by this script."""
    h = parse(buf)
    cc = h["chans"]
    stored = []
    if h["comp"] == 0:
        for f in range(h["frames"]):
            at = h["data_off"] + f * cc
            stored.append(buf[at:at + cc])
    else:
        blocks = h["blocks"]
        for i, (first, off, ln) in enumerate(blocks):
            end_frame = blocks[i + 1][0] if i + 1 < len(blocks) else h["frames"]
            raw = buf[off:off + ln]
            data = zstd_decompress_all(raw) if h["comp"] == 1 else zlib.decompress(raw)
            n = end_frame - first
            assert len(data) == n * cc, (len(data), n, cc)
            stored += [data[k * cc:(k + 1) * cc] for k in range(n)]
    assert len(stored) == h["frames"]
    return h, [expand(h, s) for s in stored]


def var_header(code, data):
    return struct.pack("<H", 4 + len(data)) + code + data


def write_fseq(path, frames, step, version, comp, ranges=(), frames_per_block=7,
               zstd_frames_per_block=1, reserved=2):
    """Independent writer. `frames` are stored frames (already sparse-packed)."""
    cc = len(frames[0]) if frames else 0
    vars_ = var_header(b"sp", b"fseq_reference.py\0") + var_header(b"mf", b"song.mp3\0")
    if version == 1:
        hdr_len = 28
        off = (28 + len(vars_) + 3) // 4 * 4
        head = b"PSEQ" + struct.pack("<HBBHIIBBHHBBH", off, 0, 1, 28, cc, len(frames), step, 0,
                                     0, 0, 1, 2, 0)
        body = b"".join(frames)
        blob = head + vars_
        blob += b"\0" * (off - len(blob))
        open(path, "wb").write(blob + body)
        return
    blocks = []
    if comp:
        for first in range(0, len(frames), frames_per_block):
            chunk = frames[first:first + frames_per_block]
            if comp == 2:
                data = zlib.compress(b"".join(chunk))
            else:
                # split the block's frames over several zstd frames
                k = max(1, (len(chunk) + zstd_frames_per_block - 1) // zstd_frames_per_block)
                data = b"".join(zstandard.ZstdCompressor(level=3, write_content_size=False)
                                .compress(b"".join(chunk[j:j + k]))
                                for j in range(0, len(chunk), k))
            blocks.append((first, data))
    table = b"".join(struct.pack("<II", f, len(d)) for f, d in blocks)
    table += b"\0" * (8 * reserved)
    nblocks = len(blocks) + reserved
    sparse = b"".join(struct.pack("<I", s)[:3] + struct.pack("<I", c)[:3] for s, c in ranges)
    hdr_len = 32 + len(table) + len(sparse)
    off = (hdr_len + len(vars_) + 3) // 4 * 4
    head = b"PSEQ" + struct.pack("<HBBHIIBB", off, 1, 2, hdr_len, cc, len(frames), step, 0)
    head += bytes([comp | ((nblocks >> 4) & 0xF0), nblocks & 0xFF, len(ranges), 0])
    head += struct.pack("<Q", 123456789)
    blob = head + table + sparse + vars_
    blob += b"\0" * (off - len(blob))
    body = b"".join(d for _, d in blocks) if comp else b"".join(frames)
    open(path, "wb").write(blob + body)


class Checker:
    def __init__(self, player):
        self.player = player
        self.passed = 0
        self.failed = 0

    def result(self, ok, what):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(("ok   " if ok else "FAIL ") + what, flush=True)

    def dump(self, path):
        return subprocess.run([self.player, "seq", "dump", path], check=True,
                              capture_output=True).stdout

    def compare_all(self, path, expect, flen, label):
        try:
            got = self.dump(path)
        except subprocess.CalledProcessError as e:
            self.result(False, f"{label}: seq dump failed: {e.stderr.decode(errors='replace').strip()}")
            return
        bad = [n for n, e in enumerate(expect) if got[n * flen:(n + 1) * flen] != e]
        size_ok = len(got) == flen * len(expect)
        detail = f"{len(expect)} frames" if not bad and size_ok else \
            f"{len(bad)} frames differ (first {bad[:5]}), dump {len(got)} bytes vs {flen * len(expect)}"
        self.result(not bad and size_ok, f"{label}: every frame equal ({detail})")

    def compare_some(self, path, expect, label):
        picks = sorted({0, 1, 9, 10, 11, len(expect) // 2, len(expect) - 1})
        for n in picks:
            if n < 0 or n >= len(expect):
                continue
            r = subprocess.run([self.player, "seq", "frame", path, str(n)], capture_output=True)
            self.result(r.returncode == 0 and r.stdout == expect[n],
                        f"{label}: seq frame {n} {r.stderr.decode(errors='replace').strip()}")
        r = subprocess.run([self.player, "seq", "frame", path, str(len(expect))],
                           capture_output=True, text=True)
        self.result(r.returncode != 0 and f"0..={len(expect) - 1}" in r.stderr,
                    f"{label}: frame {len(expect)} out of range is an error naming 0..={len(expect) - 1}")


def main():
    player, source = sys.argv[1], sys.argv[2]
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="fseq-ref-")
    os.makedirs(work, exist_ok=True)
    c = Checker(player)
    files = sorted(f for f in os.listdir(source) if f.endswith(".fseq"))
    if not files:
        print(f"no .fseq files in {source}")
        return 1
    for name in files:
        path = os.path.join(source, name)
        buf = open(path, "rb").read()
        h, frames = frames_of(buf)
        flen = expanded_len(h)
        c.compare_all(path, frames, flen, name)
        c.compare_some(path, frames, name)
        info = json.loads(subprocess.run([player, "seq", "inspect", "--json", path], check=True,
                                         capture_output=True).stdout)
        def text(code):
            v = h["vars"].get(code)
            return v.split(b"\0", 1)[0].decode("utf-8", "replace") if v is not None else None
        want = {"version": f"{h['major']}.{h['minor']}", "channels": h["chans"],
                "frames": h["frames"], "step_ms": h["step"],
                "compression": ["none", "zstd", "zlib"][h["comp"]],
                "block_table_len": h["entries"],
                "used_blocks": len(h["blocks"]),
                "sparse_ranges": [[s_, n_] for s_, n_ in h["ranges"]],
                "variable_headers": h["codes"],
                "media_file": text("mf"), "producer": text("sp")}
        got = {k: info.get(k) for k in want}
        got["used_blocks"] = len(info.get("blocks", []))
        got["sparse_ranges"] = [[r["start"], r["count"]] for r in info.get("sparse_ranges", [])]
        got["variable_headers"] = [v["code"] for v in info.get("variable_headers", [])]
        c.result(got == want, f"{name}: inspect --json {got}")
        # Re-encode with this script's writer (first 120 frames keep it quick).
        sub = frames[:120]
        base = os.path.join(work, name[:-5])
        variants = [
            ("v1", dict(version=1, comp=0), sub, ()),
            ("v2-none", dict(version=2, comp=0), sub, ()),
            ("v2-zlib", dict(version=2, comp=2), sub, ()),
            ("v2-zstd-3frames-per-block", dict(version=2, comp=1, zstd_frames_per_block=3), sub, ()),
        ]
        # Sparse: two ranges of the file's channels, stored in reverse order.
        if flen >= 64:
            a, b = (0, flen // 4), (flen // 2, flen // 4)
            ranges = (b, a)
            def pack(fr):
                return fr[b[0]:b[0] + b[1]] + fr[a[0]:a[0] + a[1]]
            def masked(fr):
                out = bytearray(max(a[0] + a[1], b[0] + b[1]))
                for s, n in (a, b):
                    out[s:s + n] = fr[s:s + n]
                return bytes(out)
            variants.append(("v2-zstd-sparse", dict(version=2, comp=1), [pack(f) for f in sub],
                             ranges, ))
            variants.append(("v2-zlib-sparse", dict(version=2, comp=2), [pack(f) for f in sub],
                             ranges))
        for label, kw, stored, ranges in variants:
            p = f"{base}-{label}.fseq"
            write_fseq(p, stored, h["step"], ranges=ranges, **kw)
            h2, mine = frames_of(open(p, "rb").read())
            if ranges:
                expect = [masked(f) for f in sub]
                c.result(mine == expect, f"{name} {label}: own writer/reader agree")
            c.compare_all(p, mine, expanded_len(h2), f"{name} {label}")
    print(f"fseq reference: {c.passed} passed, {c.failed} failed")
    return 1 if c.failed else 0


if __name__ == "__main__":
    sys.exit(main())
