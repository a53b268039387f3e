"""A sequence whose every universe says which frame it belongs to, for the rate-limit bench.

Frame f of a pole of U universes of S slots: universe u's first slots are f (u32 big-endian)
and u (u16 big-endian), then S - 6 slots of 0x40. A receiver that reads them knows, for every
datagram, which frame and universe it carries without knowing how the sender numbers its
packets, so it can count complete frames and each universe's own rate (frame_rx.py).

The file is FSEQ 2.0 with zlib blocks, written from docs/formats.md ("FSEQ", "Version 2"):
32-byte fixed header, a block table of (u32 first frame, u32 compressed length), no sparse
ranges, no variable headers, channel data from a 4-byte-aligned offset; every integer
little-endian. It shares nothing with the player's reader.
"""

from __future__ import annotations

import struct
import zlib

FILLER = 0x40


def universe_bytes(frame: int, universe: int, size: int) -> bytes:
    return struct.pack(">IH", frame & 0xFFFFFFFF, universe & 0xFFFF) + bytes([FILLER]) * (size - 6)


def frame_bytes(frame: int, universes: int, size: int) -> bytes:
    return b"".join(universe_bytes(frame, u, size) for u in range(universes))


def parse_mark(slots: bytes) -> tuple[int, int] | None:
    """(frame, universe index) from a universe's slots, or None when they carry no mark."""
    if len(slots) < 6:
        return None
    return struct.unpack_from(">IH", slots, 0)


def write(path: str, universes: int, size: int, frames: int, step_ms: int, block_frames: int = 20) -> int:
    """Writes the sequence; returns its channel count."""
    if size < 6:
        raise ValueError("a universe needs at least 6 slots for the mark")
    channels = universes * size
    blocks = []
    for first in range(0, frames, block_frames):
        raw = b"".join(frame_bytes(f, universes, size) for f in range(first, min(frames, first + block_frames)))
        blocks.append((first, zlib.compress(raw, 1)))
    if len(blocks) > 4095:
        raise ValueError(f"{len(blocks)} blocks; FSEQ 2 holds at most 4095 (raise block_frames)")
    header_end = 32 + 8 * len(blocks)
    data_offset = (header_end + 3) // 4 * 4
    hdr = bytearray(32)
    hdr[0:4] = b"PSEQ"
    struct.pack_into("<H", hdr, 4, data_offset)
    hdr[6], hdr[7] = 0, 2
    struct.pack_into("<H", hdr, 8, header_end)  # first variable header (none)
    struct.pack_into("<I", hdr, 10, channels)
    struct.pack_into("<I", hdr, 14, frames)
    hdr[18] = step_ms
    hdr[19] = 0
    hdr[20] = 2 | ((len(blocks) >> 4) & 0xF0)
    hdr[21] = len(blocks) & 0xFF
    hdr[22] = 0
    hdr[23] = 0
    struct.pack_into("<Q", hdr, 24, 2026_12_02)
    with open(path, "wb") as f:
        f.write(hdr)
        for first, data in blocks:
            f.write(struct.pack("<II", first, len(data)))
        f.write(b"\0" * (data_offset - header_end))
        for _, data in blocks:
            f.write(data)
    return channels
