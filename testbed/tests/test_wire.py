"""Decoders against hand-computed packets from the spec documents, and malformed inputs."""

import struct

import pytest

import wire

# docs/protocols/bigpacket.md, "Example": sequence 7, pole 3, two RGB pixels, CRC 0x43877DA9.
BP_EXAMPLE = bytes.fromhex(
    "42 47 50 4B 01 00 01 20 00 03 00 02 00 00 00 07"
    " 00 06 0A 24 18 1E 40 00 00 06 00 00 43 87 7D A9"
    " FF 00 00 00 80 FF"
)


def test_bigpacket_doc_example_parses():
    p = wire.parse_bigpacket(BP_EXAMPLE)
    assert (p.version, p.flags, p.pixel_format, p.header_len) == (1, 0, 1, 32)
    assert (p.pole_id, p.pixel_count, p.sequence) == (3, 2, 7)
    assert p.sender_ts_us == 1_700_000_000_000_000
    assert (p.payload_len, p.crc) == (6, 0x43877DA9)
    assert p.payload == bytes.fromhex("ff00000080ff")
    assert not p.end


def test_bigpacket_encoder_reproduces_doc_example():
    got = wire.encode_bigpacket(3, 7, 1_700_000_000_000_000, bytes.fromhex("ff00000080ff"))
    assert got == BP_EXAMPLE


def test_bigpacket_longer_header_is_skipped_by_header_length():
    # A later version may append header fields; v1 receivers find the payload at header length.
    b = bytearray(BP_EXAMPLE)
    b[7] = 36
    b[32:32] = b"\xaa\xbb\xcc\xdd"
    p = wire.parse_bigpacket(bytes(b))
    assert p.payload == bytes.fromhex("ff00000080ff")


@pytest.mark.parametrize(
    "mutate,reason",
    [
        (lambda b: b[:31], "short datagram"),
        (lambda b: b"XGPK" + b[4:], "bad magic"),
        (lambda b: b[:4] + b"\x02" + b[5:], "unknown version"),
        (lambda b: b[:7] + b"\x1f" + b[8:], "bad header length"),
        (lambda b: b[:7] + b"\xff" + b[8:], "bad header length"),
        (lambda b: b[:6] + b"\x03" + b[7:], "bad pixel format"),
        (lambda b: b[:6] + b"\x02" + b[7:], "payload length != pixel count x bytes per pixel"),
        (lambda b: b + b"\x00", "header length + payload length != datagram length"),
        (lambda b: b[:-1], "header length + payload length != datagram length"),
    ],
)
def test_bigpacket_malformed(mutate, reason):
    with pytest.raises(wire.Malformed) as e:
        wire.parse_bigpacket(mutate(BP_EXAMPLE))
    assert e.value.reason == reason
    assert not isinstance(e.value, wire.ChecksumFailure)


def test_bigpacket_checksum_failure():
    b = bytearray(BP_EXAMPLE)
    b[-1] ^= 0x01
    with pytest.raises(wire.ChecksumFailure) as e:
        wire.parse_bigpacket(bytes(b))
    assert e.value.expected == 0x43877DA9


# DDP, hand-built from the 3waylabs header layout: flags 0x41 (v1 + PUSH), sequence 3,
# type 0x0B (RGB 8 bit), id 1, offset 1440 bytes (0x000005A0 BE), length 6 (BE).
DDP_PUSH = bytes.fromhex("41 03 0B 01 00 00 05 A0 00 06 FF 00 00 00 80 FF")


def test_ddp_hand_packet():
    p = wire.parse_ddp(DDP_PUSH)
    assert p.push and not p.query
    assert (p.sequence, p.data_type, p.dest_id, p.offset, p.length) == (3, 0x0B, 1, 1440, 6)
    assert p.data == bytes.fromhex("ff00000080ff")
    assert p.timecode is None


def test_ddp_timecode_moves_data():
    raw = bytes.fromhex("51 01 0B 01 00 00 00 00 00 03 12 34 56 78 01 02 03")
    p = wire.parse_ddp(raw)
    assert p.timecode == 0x12345678 and p.data == b"\x01\x02\x03"


@pytest.mark.parametrize(
    "raw,reason",
    [
        (DDP_PUSH[:9], "short datagram"),
        (b"\x81" + DDP_PUSH[1:], "unknown version"),
        (DDP_PUSH[:-1], "data shorter than length field"),
        (DDP_PUSH + b"\x00", "data longer than length field"),
    ],
)
def test_ddp_malformed(raw, reason):
    with pytest.raises(wire.Malformed) as e:
        wire.parse_ddp(raw)
    assert e.value.reason == reason


def test_ddp_encoder_splits_at_1440_with_push_on_last_only():
    pkts = wire.encode_ddp_frame(bytes(range(256)) * 12, first_sequence=15)  # 3072 bytes
    assert [p[0] for p in pkts] == [0x40, 0x40, 0x41]
    assert [p[1] for p in pkts] == [15, 1, 2]  # 1..15 wraps to 1, never 0
    assert [struct.unpack(">I", p[4:8])[0] for p in pkts] == [0, 1440, 2880]
    assert [struct.unpack(">H", p[8:10])[0] for p in pkts] == [1440, 1440, 192]
    assert all(p[2] == 0x0B for p in pkts)


def test_ddp_bytes_per_pixel():
    assert wire.ddp_bytes_per_pixel(0x0B) == 3
    assert wire.ddp_bytes_per_pixel(0x1B) == 4
    assert wire.ddp_bytes_per_pixel(0x00) == 3


# E1.31-2018 data packet, universe 1, sequence 5, priority 100, three slots FF 80 00,
# laid out by hand from the standard's tables (root, framing, DMP layers).
SACN_HAND = (
    bytes.fromhex("0010 0000 4153432d45312e3137000000")  # preamble, postamble, ACN id
    + bytes.fromhex("7071 00000004")  # root flags+length (129-16), VECTOR_ROOT_E131_DATA
    + bytes(range(16))  # CID
    + bytes.fromhex("705b 00000002")  # framing flags+length (129-38), VECTOR_E131_DATA_PACKET
    + b"hand".ljust(64, b"\x00")  # source name
    + bytes.fromhex("64 0000 05 00 0001")  # priority, sync addr, sequence, options, universe
    + bytes.fromhex("700e 02 a1 0000 0001 0004")  # DMP flags+length (129-115), vector, types, count 4
    + bytes.fromhex("00 ff 80 00")  # start code, 3 slots
)


def test_sacn_hand_packet_through_sacn_package():
    assert len(SACN_HAND) == 129
    p = wire.parse_sacn(SACN_HAND)
    assert (p.universe, p.sequence, p.priority, p.start_code) == (1, 5, 100, 0)
    assert p.channels == b"\xff\x80\x00"  # not padded to 512 (the package pads; we cut)
    assert not p.terminated and not p.preview


def test_sacn_encoder_matches_hand_packet():
    assert wire.encode_sacn(1, 5, b"\xff\x80\x00", cid=bytes(range(16)), source_name="hand") == SACN_HAND


@pytest.mark.parametrize(
    "raw,reason",
    [
        (SACN_HAND[:20], "short datagram"),
        (b"\x00\x11" + SACN_HAND[2:], "not an ACN root layer"),
        (SACN_HAND[:125], "short datagram"),
        (SACN_HAND[:-1], "root layer length != datagram length"),
        (SACN_HAND[:123] + b"\x00\x00" + SACN_HAND[125:], "bad property value count"),
        (SACN_HAND[:123] + b"\x00\x05" + SACN_HAND[125:], "property value count != datagram length"),
        (SACN_HAND[:40] + b"\x00\x00\x00\x09" + SACN_HAND[44:], "sacn package rejected it: TypeError"),
        (SACN_HAND[:113] + b"\x00\x00" + SACN_HAND[115:], "sacn package rejected it: ValueError"),
    ],
)
def test_sacn_malformed(raw, reason):
    with pytest.raises(wire.Malformed) as e:
        wire.parse_sacn(raw)
    assert e.value.reason == reason


def test_sacn_extended_packets_are_ignored_not_malformed():
    sync = bytearray(SACN_HAND[:49])
    sync[18:22] = b"\x00\x00\x00\x08"
    with pytest.raises(wire.SacnIgnored):
        wire.parse_sacn(bytes(sync))


def test_sacn_multicast_group():
    assert wire.sacn_multicast_group(1) == "239.255.0.1"
    assert wire.sacn_multicast_group(0x0102) == "239.255.1.2"
