"""Decoders (and the stand-in sender's encoders) for the three pole protocols.

Written from the documents, not from the player's encoders:
- bigPacket v1: docs/protocols/bigpacket.md (this project's own protocol);
- DDP: the 3waylabs spec as docs/formats.md summarises it (10-byte header, offset in
  bytes big-endian, length big-endian, PUSH 0x01 on the last packet, sequence 1..15, 0 = unused,
  data type 0x0B = RGB 8 bit, 0x1B = RGBW 8 bit, port 4048);
- sACN (E1.31-2018): parsed by the PyPI `sacn` package's `DataPacket.make_data_packet` (an
  implementation we did not write), plus the length and identifier checks of E1.31 that the
  package skips (it pads every universe to 512 channels and never reads the property value
  count). See docs/testbed.md for why the package's *receiver* class cannot be used.

Every decoder is a pure function: bytes in, a result or a `Malformed(reason)` out.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

# ---------------------------------------------------------------- bigPacket v1

BP_MAGIC = b"BGPK"
BP_VERSION = 1
BP_HEADER_LEN = 32
BP_FLAG_END = 0x01
BP_FORMAT_BPP = {1: 3, 2: 4}  # 1 = RGB8, 2 = RGBW8
BP_PORT = 5599


class Malformed(Exception):
    """A datagram the receiver drops; `reason` is the counter it is counted under."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ChecksumFailure(Malformed):
    def __init__(self, expected: int, actual: int):
        super().__init__("checksum failure")
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True)
class BigPacket:
    version: int
    flags: int
    pixel_format: int
    header_len: int
    pole_id: int
    pixel_count: int
    sequence: int
    sender_ts_us: int
    payload_len: int
    crc: int
    payload: bytes

    @property
    def end(self) -> bool:
        return bool(self.flags & BP_FLAG_END)


def parse_bigpacket(data: bytes) -> BigPacket:
    """Applies the receiver rules of bigpacket.md in order; raises Malformed with the reason."""
    n = len(data)
    if n < BP_HEADER_LEN:
        raise Malformed("short datagram")
    if data[0:4] != BP_MAGIC:
        raise Malformed("bad magic")
    version, flags, fmt, hlen = data[4], data[5], data[6], data[7]
    if version != BP_VERSION:
        raise Malformed("unknown version")
    if hlen < BP_HEADER_LEN or hlen > n:
        raise Malformed("bad header length")
    if fmt not in BP_FORMAT_BPP:
        raise Malformed("bad pixel format")
    pole_id, count, seq, ts, plen, _reserved, crc = struct.unpack_from(">HHIQHHI", data, 8)
    if plen != count * BP_FORMAT_BPP[fmt]:
        raise Malformed("payload length != pixel count x bytes per pixel")
    if hlen + plen != n:
        raise Malformed("header length + payload length != datagram length")
    payload = bytes(data[hlen:])
    actual = zlib.crc32(payload) & 0xFFFFFFFF
    if actual != crc:
        raise ChecksumFailure(crc, actual)
    return BigPacket(version, flags, fmt, hlen, pole_id, count, seq, ts, plen, crc, payload)


def encode_bigpacket(
    pole_id: int, sequence: int, sender_ts_us: int, payload: bytes, pixel_format: int = 1, flags: int = 0
) -> bytes:
    bpp = BP_FORMAT_BPP[pixel_format]
    if len(payload) % bpp:
        raise ValueError(f"payload of {len(payload)} bytes is not whole pixels of {bpp} bytes")
    header = BP_MAGIC + struct.pack(
        ">BBBBHHIQHHI",
        BP_VERSION,
        flags,
        pixel_format,
        BP_HEADER_LEN,
        pole_id,
        len(payload) // bpp,
        sequence & 0xFFFFFFFF,
        sender_ts_us,
        len(payload),
        0,
        zlib.crc32(payload) & 0xFFFFFFFF,
    )
    return header + payload


# ---------------------------------------------------------------- DDP

DDP_PORT = 4048
DDP_HEADER_LEN = 10
DDP_FLAG_VER1 = 0x40
DDP_FLAG_TIMECODE = 0x10
DDP_FLAG_STORAGE = 0x08
DDP_FLAG_REPLY = 0x04
DDP_FLAG_QUERY = 0x02
DDP_FLAG_PUSH = 0x01
DDP_TYPE_RGB8 = 0x0B
DDP_TYPE_RGBW8 = 0x1B
DDP_MAX_DATA = 1440


@dataclass(frozen=True)
class DdpPacket:
    flags: int
    sequence: int  # 1..15, 0 = not used
    data_type: int
    dest_id: int
    offset: int  # in bytes
    length: int
    timecode: int | None
    data: bytes

    @property
    def push(self) -> bool:
        return bool(self.flags & DDP_FLAG_PUSH)

    @property
    def query(self) -> bool:
        return bool(self.flags & DDP_FLAG_QUERY)

    @property
    def reply(self) -> bool:
        return bool(self.flags & DDP_FLAG_REPLY)


def ddp_bytes_per_pixel(data_type: int) -> int:
    """TTT bits (3..5) of the data type: 3 = RGBW (4 bytes); anything else is treated as RGB."""
    return 4 if (data_type >> 3) & 0x07 == 3 else 3


def parse_ddp(data: bytes) -> DdpPacket:
    n = len(data)
    if n < DDP_HEADER_LEN:
        raise Malformed("short datagram")
    flags = data[0]
    if flags >> 6 != 1:
        raise Malformed("unknown version")
    hlen = DDP_HEADER_LEN + (4 if flags & DDP_FLAG_TIMECODE else 0)
    if n < hlen:
        raise Malformed("short datagram")
    seq = data[1] & 0x0F
    dtype, dest = data[2], data[3]
    offset, length = struct.unpack_from(">IH", data, 4)
    timecode = struct.unpack_from(">I", data, 10)[0] if flags & DDP_FLAG_TIMECODE else None
    if flags & DDP_FLAG_QUERY:
        # A query carries no data: `length` is the number of bytes asked for.
        return DdpPacket(flags, seq, dtype, dest, offset, length, timecode, b"")
    if n < hlen + length:
        raise Malformed("data shorter than length field")
    if n > hlen + length:
        raise Malformed("data longer than length field")
    return DdpPacket(flags, seq, dtype, dest, offset, length, timecode, bytes(data[hlen:]))


def encode_ddp_frame(pixels: bytes, first_sequence: int, data_type: int = DDP_TYPE_RGB8, dest_id: int = 1) -> list[bytes]:
    """One frame as DDP packets of at most 1440 data bytes, PUSH on the last. Sequence numbers
    run 1..15 per packet starting at `first_sequence`."""
    packets = []
    seq = first_sequence
    offsets = list(range(0, len(pixels), DDP_MAX_DATA)) or [0]
    for i, off in enumerate(offsets):
        chunk = pixels[off : off + DDP_MAX_DATA]
        flags = DDP_FLAG_VER1 | (DDP_FLAG_PUSH if i == len(offsets) - 1 else 0)
        packets.append(struct.pack(">BBBBIH", flags, seq, data_type, dest_id, off, len(chunk)) + chunk)
        seq = seq % 15 + 1
    return packets


def ddp_next_sequence(seq: int, packets: int) -> int:
    for _ in range(packets):
        seq = seq % 15 + 1
    return seq


# ---------------------------------------------------------------- sACN (E1.31-2018)

SACN_PORT = 5568
ACN_PACKET_IDENTIFIER = b"ASC-E1.17\x00\x00\x00"
VECTOR_ROOT_E131_DATA = 0x00000004
VECTOR_ROOT_E131_EXTENDED = 0x00000008
VECTOR_E131_DATA_PACKET = 0x00000002
SACN_DATA_OFFSET = 126  # first DMX slot after the start code
SACN_OPT_PREVIEW = 0x80
SACN_OPT_TERMINATED = 0x40


def sacn_multicast_group(universe: int) -> str:
    return f"239.255.{universe >> 8}.{universe & 0xFF}"


@dataclass(frozen=True)
class SacnData:
    universe: int
    sequence: int
    priority: int
    preview: bool
    terminated: bool
    start_code: int
    channels: bytes  # exactly the property value count − 1 slots, not padded


class SacnIgnored(Exception):
    """A valid E1.31 packet that carries no level data for the pole (sync, discovery)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def parse_sacn(data: bytes) -> SacnData:
    try:
        from sacn.messages.data_packet import DataPacket
    except ImportError as e:  # pragma: no cover - deps file installs it
        raise RuntimeError("the `sacn` Python package is missing: pip install sacn (scripts/deps/testbed.pip)") from e
    n = len(data)
    if n < 22:
        raise Malformed("short datagram")
    # Checks from E1.31-2018 section 5 that the package does not make.
    if data[0:2] != b"\x00\x10" or data[4:16] != ACN_PACKET_IDENTIFIER:
        raise Malformed("not an ACN root layer")
    root_vector = struct.unpack_from(">I", data, 18)[0]
    if root_vector == VECTOR_ROOT_E131_EXTENDED:
        raise SacnIgnored("extended packet (sync or discovery)")
    if n < SACN_DATA_OFFSET:
        raise Malformed("short datagram")
    root_len = struct.unpack_from(">H", data, 16)[0] & 0x0FFF
    if root_len != n - 16:
        raise Malformed("root layer length != datagram length")
    count = struct.unpack_from(">H", data, 123)[0]
    if count < 1 or count > 513:
        raise Malformed("bad property value count")
    if n != SACN_DATA_OFFSET - 1 + count:
        raise Malformed("property value count != datagram length")
    try:
        pkt = DataPacket.make_data_packet(tuple(data))
    except (TypeError, ValueError) as e:
        raise Malformed(f"sacn package rejected it: {type(e).__name__}") from e
    channels = bytes(pkt.dmxData[: count - 1])
    return SacnData(
        universe=pkt.universe,
        sequence=pkt.sequence,
        priority=pkt.priority,
        preview=pkt.option_PreviewData,
        terminated=pkt.option_StreamTerminated,
        start_code=pkt.dmxStartCode,
        channels=channels,
    )


def encode_sacn(
    universe: int,
    sequence: int,
    channels: bytes,
    cid: bytes = b"pfx-testbed-cid!",
    source_name: str = "pfx testbed stand-in",
    priority: int = 100,
    options: int = 0,
) -> bytes:
    """An E1.31-2018 data packet, from the standard's section 4 layout."""
    if len(channels) > 512:
        raise ValueError("a universe holds at most 512 channels")
    if len(cid) != 16:
        raise ValueError("CID is 16 bytes")
    n = SACN_DATA_OFFSET + len(channels)
    name = source_name.encode("utf-8")[:63].ljust(64, b"\x00")
    out = bytearray()
    out += struct.pack(">HH", 0x0010, 0x0000) + ACN_PACKET_IDENTIFIER
    out += struct.pack(">HI", 0x7000 | (n - 16), VECTOR_ROOT_E131_DATA) + cid
    out += struct.pack(">HI", 0x7000 | (n - 38), VECTOR_E131_DATA_PACKET) + name
    out += struct.pack(">BHBBH", priority, 0, sequence & 0xFF, options, universe)
    out += struct.pack(">HBBHHH", 0x7000 | (n - 115), 0x02, 0xA1, 0x0000, 0x0001, len(channels) + 1)
    out += b"\x00" + channels
    assert len(out) == n
    return bytes(out)
