"""The rate-limit receiver's parser and the analysis: hand-made packets and records."""

import array
import struct

import frame_rx
import frames
import marked_show
import wire


def data_packet(universe: int, frame: int, index: int) -> memoryview:
    # The stand-in sender's encoder, written from the standard separately from frame_rx.
    return memoryview(bytearray(wire.encode_sacn(universe, 1, marked_show.universe_bytes(frame, index, 510))))


def test_a_marked_data_packet_parses_to_its_universe_and_frame():
    p = data_packet(7, 1234, 6)
    kind, uni, _seq, mark = frame_rx.parse(p, len(p))
    assert (kind, uni) == (frame_rx.KIND_DATA, 7)
    assert marked_show.parse_mark(mark) == (1234, 6)


def test_bad_lengths_and_identifiers_are_malformed():
    p = bytearray(data_packet(1, 0, 0))
    for bad in (p[:-1], p[:4] + b"X" + p[5:]):
        try:
            frame_rx.parse(memoryview(bad), len(bad))
        except frame_rx.Malformed:
            continue
        raise AssertionError("accepted a malformed packet")


def test_a_sync_packet_parses_as_sync():
    root = struct.pack(">HH", 0x0010, 0) + frame_rx.ACN_ID
    root += struct.pack(">HI", 0x7000 | (49 - 16), frame_rx.VECTOR_ROOT_EXTENDED) + b"c" * 16
    pkt = root + struct.pack(">HI", 0x7000 | (49 - 38), frame_rx.VECTOR_FRAMING_SYNC) + struct.pack(">BHH", 9, 999, 0)
    assert len(pkt) == 49
    assert frame_rx.parse(memoryview(pkt), 49)[:3] == (frame_rx.KIND_SYNC, 999, 9)


def records(rows):
    a = (array.array("q"), array.array("H"), array.array("I"), array.array("B"))
    for r in rows:
        for arr, v in zip(a, r):
            arr.append(v)
    return a


def test_complete_torn_per_universe_age_and_recovery():
    P = 25_000
    rows = []
    # 3 universes, frames 0..39 every period; frame 20-29 lose universe 3 (torn); 30.. whole.
    for f in range(40):
        for u in (1, 2, 3):
            if 20 <= f < 30 and u == 3:
                continue
            rows.append((1_000_000 + f * P + 100 * u, u, f % 32, 0))
    an = frames.analyse(records(rows), 3, 1, P, 32, {"a": (1_000_000, 1_000_000 + 20 * P), "b": (1_000_000 + 20 * P, 1_000_000 + 40 * P)},
                        lift_us=1_000_000 + 25 * P)  # fmt: skip
    assert an["a"]["complete_fps"] == 40.0 and an["a"]["torn_frames"] == 0
    assert an["b"]["torn_frames"] == 10 and an["b"]["complete_fps"] == 20.0
    assert an["b"]["universe_fps_min"] == 20.0 and an["b"]["worst_universes"][0][0] == 3
    # Frames unwrap past the mark's wrap at 32; age = the third universe's offset.
    assert an["a"]["age_ms_p99"] == 0.2
    # Frame 30 is due 5 periods after the lift, on the grid laid from the earliest arrival
    # (universe 1, 0.1 ms after its tick).
    assert an["recovered_ms"] == 125.1


def test_a_sync_after_a_torn_frame_is_counted():
    P = 25_000
    rows = []
    for f in range(4):
        for u in (1, 2):
            if f == 2 and u == 2:
                continue
            rows.append((1_000_000 + f * P + u, u, f, 0))
        rows.append((1_000_000 + f * P + 10, 9, f, 1))  # a sync after each frame
    an = frames.analyse(records(rows), 2, 1, P, 100, {"a": (1_000_000, 1_000_000 + 4 * P)})
    assert an["a"]["syncs_after_torn_frame"] == 1
    assert an["a"]["sync_packets_per_s"] == 40.0


def _rec_rows(P, frames_sent, universes=(1, 2, 3), torn=()):
    rows = []
    for f in frames_sent:
        for u in universes:
            if f in torn and u == universes[-1]:
                continue
            rows.append((1_000_000 + f * P + 100 * u, u, f % 32, 0))
    return rows


def test_recovery_passes_over_a_tick_the_loop_skipped_and_counts_it():
    P = 25_000
    # Frames 0..59 whole except frame 50, of which nothing arrived (a tick the late loop
    # skipped): the strict figure lands after it, the sent one at the lift, with one absent frame.
    sent = [f for f in range(60) if f != 50]
    phases = {"a": (1_000_000, 1_000_000 + 20 * P), "b": (1_000_000 + 20 * P, 1_000_000 + 60 * P)}
    an = frames.analyse(records(_rec_rows(P, sent)), 3, 1, P, 32, phases, lift_us=1_000_000 + 20 * P)
    assert an["recovered_ms"] == 775.1  # frame 51, 31 periods after the lift
    assert an["recovered_ms_sent"] == 0.1 and an["absent_after_recovered"] == 1
    assert an["torn_after_lift"] == 0


def test_recovery_still_fails_when_frames_keep_going_missing_or_torn():
    P = 25_000
    phases = {"a": (1_000_000, 1_000_000 + 20 * P), "b": (1_000_000 + 20 * P, 1_000_000 + 60 * P)}
    # Every other frame left unsent after the lift: the sent figure is early, but the absent
    # count (20) is what the caller holds against the loop's skipped ticks.
    sent = [f for f in range(60) if f < 20 or f % 2 == 0]
    an = frames.analyse(records(_rec_rows(P, sent)), 3, 1, P, 32, phases, lift_us=1_000_000 + 20 * P)
    assert an["absent_after_recovered"] == 18
    # The admission's last skip at the lift itself is before the recovery, not counted.
    sent = [f for f in range(60) if f not in (20, 21)]
    an = frames.analyse(records(_rec_rows(P, sent)), 3, 1, P, 32, phases, lift_us=1_000_000 + 20 * P)
    assert an["recovered_ms_sent"] == 50.1 and an["absent_after_recovered"] == 0
    # A torn frame late in the window is never passed over.
    an = frames.analyse(records(_rec_rows(P, range(60), torn=(50,))), 3, 1, P, 32, phases, lift_us=1_000_000 + 20 * P)
    assert an["recovered_ms_sent"] == 775.1 and an["torn_after_lift"] == 1
