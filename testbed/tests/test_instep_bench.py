"""instep_bench's pure parts: reading the pole's log, when each unit first went black, and a
try's figures on synthetic rows whose times are known."""

import instep_bench as ib

A, B, C = "10.81.0.1", "10.81.0.2", "10.81.0.3"


def test_parse_skips_torn_lines():
    rows = ib.parse_pole(["10.81.0.1 100 7\n", "10.81.0.2 1", "garbage\n", "10.81.0.2 200 B\n"])
    assert rows == [(A, 100, "7"), (B, 200, "B")]


def test_lit_means_a_recent_sequence_frame():
    rows = [(A, 1_000_000, "5"), (B, 1_000_000, "B"), (C, 100, "5")]
    assert ib.lit_now(rows, [A, B, C], 1_100_000) == [B, C]
    assert ib.lit_now(rows, [A], 1_000_000 + ib.LIT_WITHIN_US + 1) == [A]


def test_first_black_is_the_change_that_holds():
    rows = [(A, 10, "1"), (A, 20, "B"), (A, 30, "2"), (A, 40, "B"), (A, 50, "B"),
            (B, 45, "B"), (C, 5, "B"), (C, 60, "3")]  # fmt: skip
    got = ib.first_black(rows, [A, B, C], after_us=15)
    # A went black at 20 but lit again at 30: the change is the one at 40. C lit last.
    assert got == {A: 40, B: 45, C: None}


def test_a_try_in_frames_and_a_unit_that_never_went_black():
    unit_of = {A: "m", B: "r1", C: "r2"}
    r = ib.judge_try(1_000, 1_020_000, {A: 1_025_000, B: 1_025_500, C: 1_050_000}, 25.0, unit_of)
    assert r["unmeasurable"] is None
    assert r["latency_ms"] == 1049.0
    assert r["spread_ms"] == 25.0 and r["spread_frames"] == 1.0
    assert r["told_to_last_ms"] == 30.0 and r["last_unit"] == "r2"
    bad = ib.judge_try(0, None, {A: 5, B: None}, 25.0, unit_of)
    assert "r1" in bad["unmeasurable"]
    s = ib.summarize([r, bad])
    assert s["tries"] == 2 and s["measured"] == 1 and s["spread_frames"]["p99"] == 1.0


def test_a_unit_that_stopped_sending_is_the_hosts_not_the_players():
    unit_of = {A: "m", B: "r1"}
    rows = [(A, t, "1") for t in range(0, 100_000, 25_000)] + [(A, 100_000, "B")]
    rows += [(B, 0, "1"), (B, 25_000, "1"), (B, 110_000, "B")]  # 85 ms without a frame
    firsts = {A: 100_000, B: 110_000}
    why = ib.stalled(sorted(rows, key=lambda r: r[1]), firsts, 0, 25.0, unit_of)
    assert why is not None and "unit r1" in why and "85.0 ms" in why
    assert ib.stalled([r for r in rows if r[0] == A], {A: 100_000}, 0, 25.0, unit_of) is None


def test_two_operators_the_unit_holds_the_later_stamped_action():
    runs = {
        "alice": {"action": "blackout", "units": [{"unit": "m", "state": "done", "effective_unix_us": 200},
                                                   {"unit": "r1", "state": "done", "effective_unix_us": 100}]},
        "bob": {"action": "test", "units": [{"unit": "m", "state": "done", "effective_unix_us": 150},
                                             {"unit": "r1", "state": "done", "effective_unix_us": 180}]},
    }  # fmt: skip
    ok = ib.judge_laptops(runs, {"m": "blackout", "r1": "test"}, {"m": "B", "r1": "X"})
    assert [c[0] for c in ok] == [True, True], ok
    # A unit that holds the earlier action, or whose pole does not show the later one, fails.
    bad = ib.judge_laptops(runs, {"m": "test", "r1": "test"}, {"m": "B", "r1": "B"})
    assert [c[0] for c in bad] == [False, False], bad
    runs["bob"]["units"][0]["state"] = "pending"
    assert "both actions taken" in ib.judge_laptops(runs, {"m": "blackout", "r1": "test"}, {"m": "B", "r1": "X"})[0][1]


def test_a_restart_is_timed_at_the_same_frame_on_every_unit():
    # A shows the new sequence from frame 0; B joins a moment late and shows frame 1 first,
    # at A's frame 1. Both are timed at frame 1 (the highest first frame): in step.
    rows = [(A, 10, "900"), (B, 12, "900"), (A, 100, "0"), (A, 125, "1"), (B, 126, "1"),
            (A, 150, "2"), (B, 151, "2")]  # fmt: skip
    assert ib.first_restart(rows, [A, B], after_us=50) == {A: 125, B: 126}
    # Frames before the request do not count; a unit that never restarts is None.
    assert ib.first_restart(rows + [(C, 20, "0")], [A, B, C], after_us=50)[C] is None
