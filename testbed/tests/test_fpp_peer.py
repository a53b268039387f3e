"""fpp_peer against byte vectors written out by hand from FPP's MultiSync layouts (the field
table in fpp_peer's docstring), plus a real loopback round trip of the master."""

import json
import re
import socket
import threading

import pytest

import fpp_peer as fp

# A sync packet: "FPPD", type 1, length 17 (11 + the 6 bytes of "a.fseq"; the NUL is counted),
# action 2 (sync), file type 0 (sequence), frame 42, seconds 1.5 (f32 0x3fc00000), "a.fseq\0".
SYNC_42 = bytes.fromhex("46505044" "01" "1100" "02" "00" "2a000000" "0000c03f" "612e6673657100")
# open / start / stop carry frame 0 and 0.0 seconds.
OPEN_X = bytes.fromhex("46505044" "01" "0c00" "03" "00" "00000000" "00000000" "7800")
STOP_X = bytes.fromhex("46505044" "01" "0c00" "01" "00" "00000000" "00000000" "7800")


def ping_vector() -> bytes:
    """A v3 ping from 10.79.0.1 "pfx-m", FPP 9.2 (major, minor big-endian), a player that sends
    MultiSync (0x02 | 0x04), version "9.2", model "pfx", ranges "0-11", written field by field."""
    v = bytes.fromhex("46505044" "04" "2601")  # header: type 4, 294 bytes follow (0x0126 LE)
    v += bytes.fromhex("03" "00" "01" "0009" "0002" "06" "0a4f0001")  # 7..18
    v += b"pfx-m".ljust(64, b"\0") + b"\0"  # 19..82, 83
    v += b"9.2".ljust(40, b"\0") + b"\0"  # 84..123, 124
    v += b"pfx".ljust(40, b"\0") + b"\0"  # 125..164, 165
    v += b"0-11".ljust(120, b"\0")  # 166..285
    v += b"\0" * 15  # 286..300
    assert len(v) == 301
    return v


PING = ping_vector()


def test_sync_encodes_to_the_vector():
    assert fp.sync_packet(fp.A_SYNC, "a.fseq", 42, 1.5) == SYNC_42
    assert fp.sync_packet(fp.A_OPEN, "x") == OPEN_X
    assert fp.sync_packet(fp.A_STOP, "x") == STOP_X


def test_sync_decodes_from_the_vector():
    s = fp.parse_sync(SYNC_42)
    assert (s.action_name, s.file_type, s.frame, s.seconds, s.name) == ("sync", 0, 42, 1.5, "a.fseq")
    assert fp.parse_sync(OPEN_X).action_name == "open"


@pytest.mark.parametrize(
    "data, why",
    [
        (SYNC_42[:-1], "header says 7 + 17"),  # datagram shorter than the header's length
        (SYNC_42 + b"\0", "header says 7 + 17"),  # longer: FPP drops both
        (b"FPPX" + SYNC_42[4:], "not 'FPPD'"),
        (SYNC_42[:5] + b"\x11\x00" + SYNC_42[7:-1] + b"q", "not NUL-terminated"),
        (bytes.fromhex("46505044" "01" "0400" "02000000"), "shorter than 11"),
        (b"FPP", "shorter than the 7-byte header"),
    ],
)
def test_sync_what_fpp_drops(data, why):
    with pytest.raises(fp.PacketError, match=re.escape(why)):
        fp.parse_sync(data)


def test_sync_schedule_is_every_4_then_every_10():
    assert fp.sync_frames(100) == [0, 4, 8, 12, 16, 20, 24, 28, 32, 42, 52, 62, 72, 82, 92]


def test_ping_encodes_to_the_vector_and_checks_clean():
    got = fp.ping_v3("10.79.0.1", "pfx-m", major=9, minor=2, mode=0x06, version="9.2", model="pfx", ranges="0-11")
    assert got == PING
    assert fp.check_ping_v3(PING, expect_ip="10.79.0.1", expect_discover=0) == []
    d = fp.parse_ping(PING)
    assert (d["version"], d["major"], d["minor"], d["mode"], d["ip"], d["hostname"], d["ranges"]) == (
        3, 9, 2, 6, "10.79.0.1", "pfx-m", "0-11")  # fmt: skip


def _with(data: bytes, at: int, value: int) -> bytes:
    b = bytearray(data)
    b[at] = value
    return bytes(b)


@pytest.mark.parametrize(
    "at, value, why",
    [
        (0, ord("X"), "bytes 0..3"),
        (4, 1, "byte 4 (type)"),
        (5, 0x25, "bytes 5..6 (length"),
        (7, 2, "byte 7 (ping version)"),
        (8, 2, "byte 8 (discover flag)"),
        (14, 0x10, "byte 14 (mode)"),
        (18, 9, "bytes 15..18 (IPv4)"),
        (19 + 10, ord("z"), "bytes 19..82 (hostname): bytes after the first NUL"),
        (83, ord("z"), "byte 83 (after hostname)"),
        (124, 1, "byte 124 (after version)"),
        (165, 1, "byte 165 (after model)"),
        (166, ord("x"), "channel ranges"),
        (300, 1, "bytes 286..300"),
    ],
)
def test_ping_check_finds_each_wrong_byte(at, value, why):
    problems = fp.check_ping_v3(_with(PING, at, value), expect_ip="10.79.0.1")
    assert any(why in p for p in problems), problems


def test_ping_check_wrong_length():
    assert fp.check_ping_v3(PING[:207]) == ["length 207, a v3 ping is 301 bytes"]


def test_ping_range_start_after_end():
    bad = fp.ping_v3("10.79.0.1", "h", ranges="12-3")
    assert any("start after end" in p for p in fp.check_ping_v3(bad))


def test_ping_hostname_of_64_fills_its_field():
    b = fp.ping_v3("10.79.0.1", "h" * 70)
    assert b[19:83] == b"h" * 64 and b[83] == 0
    assert fp.check_ping_v3(b) == []


def test_master_round_trip_over_loopback(tmp_path):
    """The master CLI sends open, start, the syncs and stop over a real socket."""
    rx_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx_sock.bind(("127.0.0.1", 0))
    port = rx_sock.getsockname()[1]
    rx_sock.settimeout(5)
    rep = tmp_path / "m.json"
    argv = ["master", "--name", "t.fseq", "--frames", "50", "--step-ms", "1", "--to", "127.0.0.1",
            "--port", str(port), "--open-lead", "0", "--report", str(rep)]  # fmt: skip
    t = threading.Thread(target=fp.main, args=(argv,))
    t.start()
    got = []
    while True:
        try:
            data, _ = rx_sock.recvfrom(2048)
        except socket.timeout:
            break
        s = fp.parse_sync(data)
        got.append((s.action_name, s.frame))
        if s.action_name == "stop":
            break
    t.join(10)
    assert got == [("open", 0), ("start", 0)] + [("sync", f) for f in fp.sync_frames(50)] + [("stop", 0)]
    assert json.loads(rep.read_text())["sent"]["sync"] == len(fp.sync_frames(50))
