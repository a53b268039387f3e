"""Frame accounting: sequence gaps, torn frames, intervals, frame age, the 'nothing' guard."""

import wire
from tracker import BigPacketTracker, DdpTracker, SacnTracker, percentile, summary


def test_percentiles_on_data_where_median_mean_max_differ():
    v = [10, 10, 10, 200]
    assert percentile(v, 50) == 10
    assert percentile(v, 99) == 200
    assert percentile(v, 75) == 10
    s = summary(v)
    assert (s["p50"], s["p95"], s["max"], s["count"]) == (10, 200, 200, 4)
    assert summary([])["p50"] is None


def test_nothing_received_is_not_ok():
    for t in (BigPacketTracker(2, 3), DdpTracker(2), SacnTracker(2, 1, 1)):
        r = t.report()
        assert r["frames"] == 0
        assert r["ok"] is False and r["reason"] == "no frames received"


def test_only_malformed_received_is_still_not_ok():
    t = BigPacketTracker(2, 3)
    t.on_datagram(b"garbage", 0)
    r = t.report()
    assert r["ok"] is False and r["datagrams"] == 1 and r["malformed"] == {"short datagram": 1}


def bp(seq, ts, pole=3, payload=b"\x01\x02\x03\x04\x05\x06"):
    return wire.encode_bigpacket(pole, seq, ts, payload)


def test_bigpacket_gaps_age_intervals():
    t = BigPacketTracker(2, 3)
    base = 1_000_000_000
    # seq 1,2,5 (2 lost),6 then a step back; ages 1,1,1,30 ms; intervals 10,10,100 ms
    t.on_datagram(bp(1, base), base + 1000)
    t.on_datagram(bp(2, base + 10_000), base + 11_000)
    t.on_datagram(bp(5, base + 20_000), base + 21_000)
    t.on_datagram(bp(6, base + 91_000), base + 121_000)
    t.on_datagram(bp(3, base + 130_000), base + 131_000)
    t.on_datagram(bp(9, 0, pole=4), base)  # other pole: not a frame
    bad = bytearray(bp(10, base))
    bad[-1] ^= 0xFF
    t.on_datagram(bytes(bad), base)
    r = t.report()
    assert r["ok"] and r["frames"] == 5
    assert r["sequence"] == {"lost": 2, "gap_events": 1, "backwards": 1}
    assert r["checksum_failures"] == 1
    assert r["bigpacket"]["other_pole_id"] == 1
    assert r["interval_ms"]["max"] == 100.0 and r["interval_ms"]["p50"] == 10.0
    assert r["frame_age_ms"]["p50"] == 1.0 and r["frame_age_ms"]["max"] == 30.0
    # the frame after the 100 ms gap is the one that tells whether a stall left a backlog
    assert r["frame_age_after_stall_ms"]["count"] == 1 and r["frame_age_after_stall_ms"]["max"] == 30.0
    assert r["frame_age_shown_after_stall_ms"]["count"] == 1 and r["frame_age_shown_after_stall_ms"]["max"] == 30.0


def test_the_frame_shown_after_a_stall_is_the_last_of_its_burst():
    # After a 100 ms gap the link releases a held 100 ms old frame and, 0.3 ms later, the newest
    # one; 16 ms later the next regular frame. The first frame after the stall is 100 ms old;
    # what the pole shows until the next frame is the 1 ms old one.
    t = BigPacketTracker(2, 3)
    base = 1_000_000_000
    t.on_datagram(bp(1, base), base + 1_000)
    t.on_datagram(bp(2, base + 1_000), base + 101_000)
    t.on_datagram(bp(8, base + 100_300), base + 101_300)
    t.on_datagram(bp(9, base + 117_000), base + 118_000)
    # a second stall whose burst is still open when the report is made
    t.on_datagram(bp(20, base + 200_000), base + 260_000)
    r = t.report()
    assert r["frame_age_after_stall_ms"]["count"] == 2 and r["frame_age_after_stall_ms"]["max"] == 100.0
    shown = r["frame_age_shown_after_stall_ms"]
    assert shown["count"] == 2 and shown["max"] == 60.0 and shown["p50"] == 1.0, shown


def test_bigpacket_sequence_wraps_without_a_gap():
    t = BigPacketTracker(2, 3)
    t.on_datagram(bp(0xFFFFFFFF, 0), 1)
    t.on_datagram(bp(0, 0), 2)
    assert t.report()["sequence"] == {"lost": 0, "gap_events": 0, "backwards": 0}


def test_bigpacket_any_pole():
    t = BigPacketTracker(2, None)
    t.on_datagram(bp(1, 0, pole=9), 1)
    assert t.frames == 1


def test_ddp_frames_push_and_torn():
    pixels = bytes(range(256)) * 12  # 3072 bytes = 1024 RGB pixels, 3 packets
    t = DdpTracker(1024)
    seq = 1
    rx = 0
    for _ in range(3):
        for p in wire.encode_ddp_frame(pixels, seq):
            rx += 1000
            t.on_datagram(p, rx)
        seq = wire.ddp_next_sequence(seq, 3)
    assert t.frames == 3 and t.torn_frames == 0 and t.lost == 0
    assert t.last_pixels == pixels
    # lose the middle packet of the next frame: torn, and the sequence shows 1 lost
    pk = wire.encode_ddp_frame(pixels, seq)
    t.on_datagram(pk[0], rx + 1)
    t.on_datagram(pk[2], rx + 2)
    r = t.report()
    assert r["frames"] == 3 and r["torn_frames"] == 1
    assert r["sequence"]["lost"] == 1 and r["sequence"]["gap_events"] == 1
    assert r["ddp"]["data_types"] == {"0x0b": 11}
    assert r["ddp"]["offsets"] == [0, 1440, 2880]
    assert r["ddp"]["push_packets"] == 4


def test_ddp_sequence_wraps_1_to_15():
    t = DdpTracker(2)
    for s in [14, 15, 1, 2]:
        t.on_datagram(bytes([0x41, s, 0x0B, 1, 0, 0, 0, 0, 0, 6]) + b"\x00" * 6, s)
    assert t.lost == 0 and t.frames == 4


def test_ddp_data_beyond_pole_is_counted():
    t = DdpTracker(2)
    t.on_datagram(bytes([0x41, 1, 0x0B, 1, 0, 0, 0, 3, 0, 6]) + b"\x00" * 6, 1)
    r = t.report()
    assert r["ddp"]["data_beyond_pole"] == 1 and r["torn_frames"] == 1 and not r["ok"]


def sacn_frame(t, frame_seq, rx, universes=(1, 2), pixels=300):
    data = bytes((frame_seq + i) & 0xFF for i in range(pixels * 3))
    for k, u in enumerate(universes):
        t.on_datagram(wire.encode_sacn(u, frame_seq, data[k * 510 : (k + 1) * 510]), rx)
    return data


def test_sacn_frames_and_per_universe_sequence():
    t = SacnTracker(300, 1, 2)
    d = sacn_frame(t, 0, 1000)
    sacn_frame(t, 1, 2000)
    assert t.frames == 2 and t.last_pixels != d
    # universe 1 lost in frame 2: the last universe completes a torn frame; u1 jumps 1 -> 3
    t.on_datagram(wire.encode_sacn(2, 2, bytes(390)), 3000)
    sacn_frame(t, 3, 4000)
    # a late packet of universe 1 (seq 1 after 3): out of order, dropped
    t.on_datagram(wire.encode_sacn(1, 1, bytes(510)), 5000)
    t.on_datagram(wire.encode_sacn(9, 1, bytes(510)), 5000)
    r = t.report()
    assert r["frames"] == 3 and r["torn_frames"] == 1
    assert r["sacn"]["universes"]["1"] == {"packets": 4, "lost": 1, "out_of_order": 1}
    assert r["sacn"]["universes"]["2"] == {"packets": 4, "lost": 0, "out_of_order": 0}
    assert r["sacn"]["other_universe"] == 1
    assert r["interval_ms"]["p50"] == 1.0 and r["interval_ms"]["max"] == 2.0  # torn frame 2 is not a frame
    assert r["frame_age_ms"] is None  # sACN carries no sender time
    assert len(t.last_pixels) == 900


def test_sacn_sequence_wrap_is_not_out_of_order():
    t = SacnTracker(1, 1, 1)
    for s in (254, 255, 0, 1):
        t.on_datagram(wire.encode_sacn(1, s, b"\x01\x02\x03"), s)
    r = t.report()
    assert r["frames"] == 4 and r["sequence"]["lost"] == 0 and r["sequence"]["backwards"] == 0


def test_reset_starts_a_new_window():
    t = BigPacketTracker(2, 3)
    t.on_datagram(bp(1, 0), 1)
    t.reset()
    assert t.report()["ok"] is False
