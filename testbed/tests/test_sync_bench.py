"""sync_bench's pure parts: the frame-number pixels, the FSEQ it writes, and the spread
measure on synthetic units whose ticks and timelines are known."""

import math
import struct

import sync_bench as sb

PERIOD_US = 1e6 / 60
STEP_MS = 17


def test_pixels_round_trip_and_reject_altered_frames():
    for f in (0, 1, 255, 256, 65535, 70000, (1 << 24) - 1):
        assert sb.decode_pixels(sb.frame_pixels(f)) == f
    px = bytearray(sb.frame_pixels(1234))
    px[2] = int(px[2] * 0.8)  # what a brightness below 1.0 would do
    assert sb.decode_pixels(bytes(px)) is None
    assert sb.decode_pixels(bytes(12)) is None


def test_fseq_header_and_frames(tmp_path):
    p = tmp_path / "t.fseq"
    sb.write_fseq(p, 100, STEP_MS)
    b = p.read_bytes()
    assert b[0:4] == b"PSEQ"
    data_off, minor, major, first_var, chans, frames, step, flags = struct.unpack_from("<HBBHIIBB", b, 4)
    assert (data_off, major, minor, first_var, chans, frames, step, flags) == (32, 2, 0, 32, 12, 100, 17, 0)
    assert b[20:24] == bytes(4)  # uncompressed, no block table, no sparse ranges
    assert len(b) == 32 + 100 * 12
    assert sb.decode_pixels(b[32 + 57 * 12 : 32 + 58 * 12]) == 57


def unit(n_ticks, timeline_ms=0.0, send_ms=0.0, start_us=1_000_000_000, first_tick=0):
    """A unit ticking at 60 fps: tick k leaves at start + k x period + send_ms and shows the
    frame its timeline (k x period + timeline_ms) is in."""
    out = []
    for k in range(first_tick, first_tick + n_ticks):
        pos_ms = k * PERIOD_US / 1000 + timeline_ms
        out.append((int(start_us + k * PERIOD_US + send_ms * 1000), max(0, math.floor(pos_ms / STEP_MS))))
    return out


def test_spread_is_the_send_alignment_not_the_timeline_sampling():
    # Timeline errors of up to 1 ms would flip a unit's frame at ticks near a frame boundary;
    # the measure only uses frames far from the boundaries, so what it reports is 0.5 ms, the
    # spread of the send times.
    by = {
        "m": unit(3600),
        "r1": unit(3600, timeline_ms=0.3, send_ms=0.2),
        "r2": unit(3600, timeline_ms=-0.9, send_ms=0.5),
        "r3": unit(3600, timeline_ms=1.0, send_ms=0.1),
    }
    r = sb.spread_cell(by, "m", STEP_MS)
    assert r["unmeasurable"] is None
    assert r["measured"] > 1500
    assert abs(r["p50"] - 0.5) < 0.01 and abs(r["p99"] - 0.5) < 0.01 and abs(r["max"] - 0.5) < 0.01
    assert abs(r["offset_p50"]["r2"] - 0.5) < 0.01


def test_a_unit_a_frame_behind_shows_as_a_frame_of_spread():
    by = {"m": unit(3600), "r1": unit(3600), "r2": unit(3600), "r3": unit(3600, timeline_ms=-17.0)}
    r = sb.spread_cell(by, "m", STEP_MS)
    assert r["p50"] > 15.0


def test_control_units_100_ms_apart():
    by = {u: unit(3600, send_ms=100.0 * i, timeline_ms=0.0) for i, u in enumerate(["m", "r1", "r2", "r3"])}
    r = sb.spread_cell(by, "m", STEP_MS)
    assert abs(r["p50"] - 300.0) < 0.01
    assert abs(r["offset_p50"]["r3"] - 300.0) < 0.01


def test_master_restart_starts_a_new_segment():
    # The master is killed after 1800 ticks and plays from frame 0 again 1 s later; the
    # remotes follow the new timeline. Frames of both halves are matched to their own half.
    later = 1_000_000_000 + int(1800 * PERIOD_US) + 1_000_000
    m = unit(1800) + unit(1800, start_us=later)
    rem = unit(1800, send_ms=0.3) + unit(1800, start_us=later, send_ms=0.3)
    r = sb.spread_cell({"m": m, "r1": rem, "r2": rem, "r3": rem}, "m", STEP_MS)
    assert r["measured"] > 1500 and abs(r["max"] - 0.3) < 0.01


def test_a_silent_unit_makes_the_cell_unmeasurable():
    r = sb.spread_cell({"m": unit(100), "r1": unit(100), "r2": [], "r3": unit(100)}, "m", STEP_MS)
    assert r["unmeasurable"] == "unit r2: no frames reached the pole"


def test_step_equal_to_the_period_measures_every_frame():
    def u50(n, send_ms=0.0):
        return [(int(1e9 + k * 20_000 + send_ms * 1000), k) for k in range(n)]
    r = sb.spread_cell({"m": u50(500), "r1": u50(500, 0.2), "r2": u50(500), "r3": u50(500)}, "m", 20)
    assert r["measured"] == 500 and abs(r["p99"] - 0.2) < 0.01


# A remote's namespace as the bench reads it (/proc/net/udp then /proc/net/igmp, one text),
# taken from a run: bound to 32320 (0x7E40), 239.70.80.80 joined on eth0.
PROC_NET = """   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 3078: 00000000:A25D 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 2943160 2 00000000eaca0c9f 0
10217: 00000000:7E40 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 2943169 2 00000000e2cf7b4b 0
Idx\tDevice    : Count Querier\tGroup    Users Timer\tReporter
1\tlo        :     2      V3
\t\t\t\tFB0000E0     1 0:00000000\t\t0
2\teth0      :     3      V3
\t\t\t\t505046EF     1 0:00000000\t\t0
\t\t\t\t010000E0     1 0:00000000\t\t0
"""


def test_sync_listening_wants_the_port_bound_and_the_group_joined():
    assert sb.sync_listening(PROC_NET, 32320, "239.70.80.80")
    assert not sb.sync_listening(PROC_NET, 32321, "239.70.80.80")  # the loss cell's port: not bound
    assert not sb.sync_listening(PROC_NET, 32320, "239.70.80.81")  # another group
    no_group = PROC_NET.replace("505046EF", "")
    assert not sb.sync_listening(no_group, 32320, "239.70.80.80")
    assert not sb.sync_listening("", 32320, "239.70.80.80")


def test_pole_writes_what_it_received_when_asked_to_flush(tmp_path):
    """The pole (run on loopback here) flushes on SIGUSR1: a datagram sent before the request
    is in its log once flush_pole returns, without waiting out the half-second flush."""
    import socket
    import subprocess
    import sys
    from types import SimpleNamespace

    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    log = tmp_path / "pole.log"
    p = subprocess.Popen([sys.executable, sb.__file__, "pole", "--port", str(port), "--out", str(log)])
    try:
        sb.wait_file(tmp_path / "pole.log.ready", 10, p)
        bed = SimpleNamespace(procs={"pole": p})
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for f in (41, 42):
            tx.sendto(bytes([0x41, 0, 1, 1, 0, 0, 0, 0, 0, 12]) + sb.frame_pixels(f), ("127.0.0.1", port))
            sb.flush_pole(bed, log)
            assert log.read_text().split()[-1] == str(f)
        tx.close()
    finally:
        p.terminate()
        p.wait(10)
