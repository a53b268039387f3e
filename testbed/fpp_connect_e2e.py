#!/usr/bin/env python3
"""End-to-end FPP Connect check against a real player, driven by fpp_connect_client.py (the
xLights stand-in). Run by scripts/tests.d/52-fpp-connect.sh inside the "xLights" network
namespace; the unit plays to two DDP pole simulators whose frame dumps it reads.

    fpp_connect_e2e.py --unit 10.88.0.1 --bind 10.88.0.2 --other-source 10.88.0.3 \
        --password PW --data DIR --pole-a DUMP --pole-b DUMP
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fpp_connect_client as xl  # noqa: E402

CHANNELS = 2700  # pole a: 0..899, a gap, pole b: 1800..2699
RANGES = "0-899,1800-2699"
failures: list[str] = []


def check(cond: bool, what: str) -> None:
    print(("ok   - " if cond else "FAIL - ") + what, flush=True)
    if not cond:
        failures.append(what)


def last_pixels(dump: str) -> str | None:
    try:
        with open(dump, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 8192))
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return json.loads(line)["pixels"]
        except (ValueError, KeyError):
            continue
    return None


def wait_pixels(dump: str, want: bytes, seconds: float = 15.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if last_pixels(dump) == want.hex():
            return True
        time.sleep(0.2)
    print(f"     {dump}: last pixels {str(last_pixels(dump))[:24]}..., want {want.hex()[:24]}...")
    return False


def profile(unit: str) -> dict | None:
    """The player's own /profile (port 8080, read-only, no password): since-start counters."""
    try:
        c = xl.http.client.HTTPConnection(unit, 8080, timeout=5)
        c.request("GET", "/profile")
        doc = json.loads(c.getresponse().read())
        return doc["since_start"]
    except (OSError, ValueError, KeyError):
        return None


def health(unit: str) -> str:
    """The player's /health (port 8080)."""
    try:
        c = xl.http.client.HTTPConnection(unit, 8080, timeout=5)
        c.request("GET", "/health")
        return c.getresponse().read().decode("utf-8", "replace")
    except OSError as e:
        return f"unreadable: {e}"


def pattern(a: bytes, n: int) -> bytes:
    return (a * (n // len(a) + 1))[:n]


def staging_files(data: str) -> list[str]:
    return sorted(os.listdir(os.path.join(data, "staging", "fpp-connect")))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--unit", required=True)
    ap.add_argument("--bind", required=True)
    ap.add_argument("--other-source", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--pole-a", required=True)
    ap.add_argument("--pole-b", required=True)
    a = ap.parse_args()

    # --- discovery, as xLights: ping, then mDNS, then the HTTP probes
    t_ping = time.monotonic()
    answers = xl.ping_discover(a.bind, [], 2.0)
    found = [p for p in answers if p["ip"] == a.unit]
    check(len(found) == 1, "discover ping answered by the unit")
    if found:
        p = found[0]
        print("     ping:", {k: p[k] for k in ("ping_version", "type_id", "major", "minor", "mode", "hostname", "version", "ranges", "length")})
        check(p["ping_version"] == 3 and p["length"] == 301, "the answer is a 301-byte v3 ping")
        check(0 < p["type_id"] < 0x80, "system type is an FPP build (xLights offers FPP Connect)")
        check((p["major"], p["minor"]) >= (7, 1), "ping version >= 7.1")
        check(p["ranges"] == RANGES, f"ping carries the outputs' channel ranges ({p['ranges']!r})")
        check(p["mode"] == "player", "mode player")
    try:
        addrs = xl.mdns_discover(5.0)
        check(a.unit in addrs, f"mDNS _fppd._udp finds the unit ({addrs})")
    except ImportError:
        check(False, "python3-zeroconf missing (scripts/deps/profiler.apt)")

    anon = xl.Unit(a.unit, None)
    st, _, _ = anon.request("GET", "/api/system/info")
    check(st == 401, f"no password: 401 ({st})")
    u = xl.Unit(a.unit, a.password)
    pr = u.probe(found[0]["type_id"] if found else None)
    check(pr["supported"] and pr["http_ok"], f"system/info with a uuid: xLights would offer the unit ({pr['status']})")
    check(pr["default_form"] == "V2 Sparse/zstd", f"mode {pr['mode']!r}: xLights defaults to a sparse file")
    check(pr["info"].get("channelRanges") == RANGES, "system/info channelRanges")
    systems = (pr["systems"] or {}).get("systems", [])
    check(len(systems) == 1 and systems[0].get("address") == a.unit, "multiSyncSystems names the unit's address")

    # --- wrong password: nothing changes (from another address, so the lockout below is its own)
    bad = xl.Unit(a.unit, "not-the-password", source=a.other_source)
    full = xl.write_fseq(None, CHANNELS, 25, 111, frame_fn=lambda i: pattern(b"\x11\x22\x33", 900) + b"\x99" * 900 + pattern(b"\x44\x55\x66", 900), nframes=7000)
    check(len(full) > 16 * 1024 * 1024, f"the full sequence is over 16 MiB ({len(full)} bytes)")
    st, _, _ = bad.request("PATCH", "/api/file/sequences", body=full[:1000], headers={
        "Upload-Offset": "0", "Upload-Length": str(len(full)), "Upload-Name": "Full.fseq",
        "Content-Type": "application/offset+octet-stream"})
    check(st == 401, f"wrong password upload: 401 ({st})")
    check(staging_files(a.data) == [], "wrong password: nothing staged")
    check(u.meta("Full.fseq") is None, "wrong password: nothing stored")
    # Rate limit: keep failing from that address until it is locked out, then even the
    # right password gets 429 there.
    codes = []
    for _ in range(6):
        b2 = xl.Unit(a.unit, "wrong", source=a.other_source)
        codes.append(b2.request("GET", "/api/system/info")[0])
    check(429 in codes, f"repeated wrong passwords are rate-limited ({codes})")
    good_there = xl.Unit(a.unit, a.password, source=a.other_source)
    check(good_there.request("GET", "/api/system/info")[0] == 429, "a locked-out address gets 429 even with the password")

    # --- hostile Upload-Names: 400, nothing written
    for name in ["../evil.fseq", "/etc/evil.fseq", "a/b.fseq", "x\0y.fseq", "..", "a" * 300 + ".fseq", ".hidden.fseq"]:
        st, _, _ = u.request("PATCH", "/api/file/sequences", body=b"PSEQ", headers={
            "Upload-Offset": "0", "Upload-Length": "4", "Upload-Name": name,
            "Content-Type": "application/offset+octet-stream"})
        check(st == 400, f"Upload-Name {name[:20]!r}: 400 ({st})")
    check(staging_files(a.data) == [], "hostile names: nothing staged")
    check(not Path("/etc/evil.fseq").exists() and not (Path(a.data).parent / "evil.fseq").exists(), "hostile names: no file outside")

    # --- oversize: refused before a byte is written
    st, _, body = u.request("PATCH", "/api/file/sequences", body=b"\0" * 4096, headers={
        "Upload-Offset": "0", "Upload-Length": str(10**15), "Upload-Name": "Huge.fseq",
        "Content-Type": "application/offset+octet-stream"})
    check(st == 507, f"upload larger than free space minus reserve: 507 ({st} {body[:80]!r})")
    check(staging_files(a.data) == [], "oversize: nothing staged")

    # --- a push as FPPConnectDialog::doUpload makes it: the playlist first (a new one, so
    #     "mainPlaylist": null), then the outputs (the unit is the sole player, so "Upload
    #     Outputs" is All), the channel ranges, the sequence and its media, the playlist again.
    u.messages.clear()
    st, body = u.post_playlist("Main", [])
    check(st == 400 and b"names no sequence" in body, f"the first POST of a new playlist changes nothing ({st} {body[:60]!r})")
    table = {"channelOutputs": [{"type": "universes", "enabled": 1, "timeout": 1000, "startChannel": 1, "channelCount": -1,
                                 "universes": [{"active": 1, "description": "Pole A", "id": 1, "startChannel": 1,
                                                "channelCount": 900, "type": 5, "address": "10.88.0.9"}]}]}
    gst, pst = u.upload_udp_out(table)
    check(gst == 200 and pst == 200, f"universeOutputs GET {gst}, POST {pst}")
    kept = Path(a.data) / "fpp-connect" / "universeOutputs.json"
    check(kept.is_file(), "xLights' output table is kept beside the show")
    ur = u.update_channel_ranges(RANGES)
    check(not ur["hung"] and ur["ranges"] == RANGES, f"UpdateChannelRanges ends: {ur}")

    # --- the full upload, in 16 MiB chunks, then a playlist
    before = profile(a.unit)
    meta = u.meta("Full.fseq")
    local = xl.fseq_summary(full)
    check(xl.needs_upload(meta, local, None), "meta 404 before: upload needed")
    ok, sts = u.upload("Full.fseq", full)
    check(ok and len(sts) >= 2 and all(s == 200 for s in sts), f"full upload in {len(sts)} chunks: {sts}")
    after = profile(a.unit)
    if before and after:
        print(f"     render loop during the upload: deadline misses +{after['deadline_misses'] - before['deadline_misses']}, "
              f"frames +{after['frames'] - before['frames']}")
    meta = u.meta("Full.fseq")
    print("     meta:", meta)
    check(meta is not None and not xl.needs_upload(meta, local, None), "meta afterwards: xLights would skip the upload")
    song = b"ID3" + bytes(range(256)) * 64
    m = u.media_meta("song.mp3")
    check(m is None, "media meta 404 before")
    ok, sts = u.upload("song.mp3", song, dir_="music")
    check(ok and sts == [200], f"media upload answered 200 ({sts})")
    m = u.media_meta("song.mp3") or {}
    check(str(m.get("format", {}).get("size")) == str(len(song)), f"media meta size: xLights skips it next time ({m})")
    check((Path(a.data) / "fpp-connect/media/music/song.mp3").read_bytes() == song, "the media file is kept as sent")
    check("pfx plays no audio" in health(a.unit), "/health says the media is kept and not played")
    t_post = time.monotonic()
    st, _ = u.post_playlist("Main", [("Full.fseq", 7000 * 0.025)])
    check(st == 200, f"POST /api/playlist/Main: {st}")
    check(wait_pixels(a.pole_a, pattern(b"\x11\x22\x33", 900)), "pole a shows the uploaded sequence")
    waited = time.monotonic() - t_post
    print(f"     the new show started {waited:.1f} s after the POST (the 2 s pattern item ended first)")
    # The same push again (Upload pressed twice): the playlist before and after, unchanged.
    for _ in range(2):
        st, _ = u.post_playlist("Main", [("Full.fseq", 7000 * 0.025)])
        check(st == 200, f"the same playlist again: 200 ({st})")
    check(u.messages == [], f"no error for xLights' Problems Uploading box: {u.messages}")
    check(wait_pixels(a.pole_b, pattern(b"\x44\x55\x66", 900)), "pole b shows channels 1801.. of it")
    st, s = u.status()
    check(st == 200 and s and s.get("current_sequence") == "Full.fseq" and s.get("status_name") == "playing",
          f"fppd/status: {s and {k: s.get(k) for k in ('status_name', 'current_sequence', 'current_playlist')}}")

    # --- a sparse upload (what xLights makes for a non-master): only the unit's ranges
    rng = xl.parse_ranges(RANGES)
    sparse = xl.write_fseq(None, CHANNELS, 25, 222, sparse=rng, nframes=200,
                           frame_fn=lambda i: pattern(b"\x0a\x0b\x0c", 900) + b"\xee" * 900 + pattern(b"\x0d\x0e\x0f", 900))
    ok, sts = u.upload("Sparse.fseq", sparse)
    check(ok, f"sparse upload: {sts}")
    m = u.meta("Sparse.fseq") or {}
    check([(r["Start"], r["Length"]) for r in m.get("Ranges", [])] == rng, f"sparse meta Ranges {m.get('Ranges')}")
    check(not xl.needs_upload(m, xl.fseq_summary(sparse), rng), "sparse meta: xLights would skip it next time")

    # wrong password on the playlist: nothing changes
    wrong = xl.Unit(a.unit, "wrong-again")
    st = wrong.request("POST", "/api/playlist/SparseOnly", body=b'{"mainPlaylist":[{"type":"sequence","sequenceName":"Sparse.fseq"}]}',
                       headers={"Content-Type": "application/json"})[0]
    check(st == 401, f"playlist with a wrong password: 401 ({st})")
    # A duration under test, not an ordering: the old show must still be playing a second on.
    time.sleep(1.0)
    check(last_pixels(a.pole_a) == pattern(b"\x11\x22\x33", 900).hex(), "after the refused playlist the old show still plays")

    # The operator asks for now (pfx's own ?switch=now): the 175 s item does not finish first.
    st, _ = u.post_playlist("SparseOnly", [("Sparse.fseq", 5.0)], query="?switch=now")
    check(st == 200, f"POST /api/playlist/SparseOnly?switch=now: {st}")
    check(wait_pixels(a.pole_a, pattern(b"\x0a\x0b\x0c", 900)), "sparse: pole a's channels land at 1..900")
    check(wait_pixels(a.pole_b, pattern(b"\x0d\x0e\x0f", 900)), "sparse: pole b's channels land at 1801..2700")

    # a playlist naming a sequence the unit lacks: refused, old show plays on
    st, _, body = u.request("POST", "/api/playlist/Nope", body=b'{"mainPlaylist":[{"type":"sequence","sequenceName":"Missing.fseq"}]}',
                            headers={"Content-Type": "application/json"})
    check(st == 400, f"playlist with a missing sequence: 400 ({st})")
    # A duration under test, as above: the sparse show still plays half a second on.
    time.sleep(0.5)
    check(last_pixels(a.pole_b) == pattern(b"\x0d\x0e\x0f", 900).hex(), "after the refused playlist the sparse show still plays")

    print(json.dumps({"requests": len(u.log), "failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
