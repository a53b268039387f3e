"""The xLights stand-in's own behaviours, each as xLights' source has it (the function named in
fpp_connect_client.py): the discover ping's bytes, what it reads from an answer, the range
merge that joins ranges across a gap, and the playlist's first POST."""

import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fpp_connect_client as xl  # noqa: E402


def test_discover_ping_is_fillfppping_buffer():
    b = xl.discover_ping_packet()
    assert len(b) == 207 and b[:5] == b"FPPD\x04" and b[5] == 200 and b[6] == 0
    assert (b[7], b[8], b[9], b[14]) == (2, 1, 0xC0, 0)
    assert b[15:19] == b"\0\0\0\0"
    assert struct.unpack_from(">H", b, 10)[0] == 2026 and (b[12], b[13]) == (0, 1)


def test_ping_answer_fields_and_modes():
    p = bytearray(301)
    p[0:5] = b"FPPD\x04"
    struct.pack_into("<H", p, 5, 294)
    p[7], p[9], p[14] = 3, 1, 6
    p[15:19] = bytes([10, 0, 0, 1])
    p[19:23] = b"unit"
    p[166:169] = b"0-0"
    r = xl.parse_ping(bytes(p))
    assert r["mode"] == "master" and r["ip"] == "10.0.0.1" and r["ranges"] == ""
    p[14] = 8
    assert xl.parse_ping(bytes(p))["mode"] == "remote"
    p[15:19] = b"\0\0\0\0"
    assert xl.parse_ping(bytes(p)) is None


def test_set_new_ranges_joins_ranges_across_a_gap_as_xlights_does():
    assert xl.set_new_ranges(xl.fill_ranges("12070-12969,13270-13869")) == "12070-13869"
    assert xl.set_new_ranges(xl.fill_ranges("0-899,900-1799")) == "0-1799"
    # Far enough apart (start >= first + last - 1) they stay two.
    assert xl.set_new_ranges(xl.fill_ranges("0-899,1800-2699")) == "0-899,1800-2699"
    assert xl.fill_ranges("5") == {5: 4}


def test_the_first_post_of_a_new_playlist_has_main_playlist_null(monkeypatch):
    sent = {}
    u = xl.Unit("127.0.0.1", None)

    def fake(method, path, body=None, headers=None):  # a test double for the unit
        if method == "GET":
            return 404, {}, b""
        sent["body"] = json.loads(body)
        return 400, {}, b""

    monkeypatch.setattr(u, "request", fake)
    u.post_playlist("New", [])
    assert sent["body"]["mainPlaylist"] is None
    assert sent["body"]["playlistInfo"] == {"total_items": 0, "total_duration": 0}
    u.post_playlist("New", [("A.fseq", 5.0)])
    assert [e["sequenceName"] for e in sent["body"]["mainPlaylist"]] == ["A.fseq"]
