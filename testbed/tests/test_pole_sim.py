"""The pole simulator as a process on loopback (unicast 127.0.0.1, no root): reports, the
'received nothing' guard, end-to-end pixel content, and the pole management API."""

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import pole_api
from send_test import expected_pixels

HERE = Path(__file__).resolve().parents[1]


def free_port(kind=socket.SOCK_DGRAM) -> int:
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_pole(tmp_path, proto, port, *extra):
    rep = tmp_path / f"{proto}.json"
    p = subprocess.Popen(
        [sys.executable, str(HERE / "pole_sim.py"), "--protocol", proto, "--listen", "127.0.0.1",
         "--port", str(port), "--group", "none", "--report", str(rep), *extra]  # fmt: skip
    )
    # Ready: the first report is written, after its socket is open and its signal
    # handlers are in. Callers wait for that report alone, so the handlers must already be
    # there when it appears: a SIGTERM sent on seeing it makes the final report.
    end = time.monotonic() + 10
    while not rep.exists():
        assert p.poll() is None, "pole_sim exited early"
        assert time.monotonic() < end, "pole_sim wrote no report within 10 s"
        time.sleep(0.02)  # the poll interval of this wait
    assert catches(p.pid, signal.SIGTERM) and catches(p.pid, signal.SIGUSR1), (
        "pole_sim wrote its first report before catching SIGTERM and SIGUSR1"
    )
    return p, rep


def catches(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler installed for `sig` (Linux: SigCgt in /proc)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    for line in status.splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def test_nothing_received_report_fails_explicitly(tmp_path):
    p, rep = start_pole(tmp_path, "bigpacket", free_port(), "--duration", "0.5")
    assert p.wait(10) == 0
    r = json.loads(rep.read_text())
    assert r["frames"] == 0
    assert r["ok"] is False and r["reason"] == "no frames received"


def test_sigterm_writes_final_report(tmp_path):
    port = free_port()
    p, rep = start_pole(tmp_path, "bigpacket", port)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    import wire

    s.sendto(wire.encode_bigpacket(0, 1, time.time_ns() // 1000, b"\x01\x02\x03"), ("127.0.0.1", port))
    # No wait: the datagrams are queued at the poles; a stopped pole reads them first.
    p.send_signal(signal.SIGTERM)
    assert p.wait(10) == 0
    r = json.loads(rep.read_text())
    assert r["frames"] == 1 and r["ok"] is True
    assert 0 <= r["frame_age_ms"]["max"] < 1000


def test_end_to_end_content_all_protocols(tmp_path):
    ports = {"bigpacket": free_port(), "sacn": free_port(), "ddp": free_port()}
    poles = {
        proto: start_pole(tmp_path, proto, port, "--pixels", "600", "--dump-frames", str(tmp_path / f"{proto}.frames"))
        for proto, port in ports.items()
    }
    send = subprocess.run(
        [sys.executable, str(HERE / "send_test.py"), "--pixels", "600", "--seconds", "1",
         "--bigpacket", f"127.0.0.1:{ports['bigpacket']}", "--sacn", f"127.0.0.1:{ports['sacn']}",
         "--ddp", f"127.0.0.1:{ports['ddp']}", "--report", str(tmp_path / "sender.json")],  # fmt: skip
        timeout=30,
    )
    assert send.returncode == 0
    # No wait: the datagrams are queued at the poles; a stopped pole reads them first.
    for proto, (p, rep) in poles.items():
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
        r = json.loads(rep.read_text())
        assert r["ok"], (proto, r)
        assert r["frames"] >= 30 and r["torn_frames"] == 0 and not r["malformed"], (proto, r)
        lines = (tmp_path / f"{proto}.frames").read_text().splitlines()
        assert len(lines) == r["frames"]
        for line in lines:
            d = json.loads(line)
            px = bytes.fromhex(d["pixels"])
            assert len(px) == 1800
            n = int.from_bytes(px[:4], "big")
            assert px == expected_pixels(n, 1800), (proto, d["frame"])
    ddp = json.loads((tmp_path / "ddp.json").read_text())["ddp"]
    assert ddp["offsets"] == [0, 1440] and ddp["data_types"] == {"0x0b": ddp["push_packets"] * 2}


# ---------------------------------------------------------------- pole management API


@pytest.fixture
def api():
    servers = []

    def make(**kw):
        st = pole_api.PoleState("pole-3", token="s3cret", **kw)
        srv = pole_api.serve(st, "127.0.0.1", 0)
        servers.append(srv)
        return st, f"http://127.0.0.1:{srv.server_address[1]}"

    yield make
    for s in servers:
        s.shutdown()


def call(url, method="GET", body=None, token=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_api_status_shape(api):
    _, base = api(link_speed=10, firmware="3.4.1")
    code, s = call(base + "/api/v1/status")
    assert code == 200
    assert s == {
        "pole_id": "pole-3",
        "model": "gen3",
        "firmware": "3.4.1",
        "link": {"speed_mbps": 10, "duplex": "full", "carrier": True},
        "fallback": {"enabled": False, "active": False},
        "config_revision": 1,
    }


def test_api_change_needs_the_token(api):
    st, base = api()
    url = base + "/api/v1/config/fallback"
    assert call(url, "PUT", {"enabled": True})[0] == 401
    assert call(url, "PUT", {"enabled": True}, token="wrong")[0] == 401
    assert call(url, "POST", {"enabled": True})[0] == 401
    assert call(base + "/api/v1/status")[1]["fallback"]["enabled"] is False
    code, body = call(url, "PUT", {"enabled": True}, token="s3cret")
    assert code == 200 and body == {"fallback": {"enabled": True, "active": False}, "config_revision": 2}
    s = call(base + "/api/v1/status")[1]  # readback
    assert s["fallback"]["enabled"] is True and s["config_revision"] == 2
    # idempotent: the same value again changes no revision
    assert call(url, "PUT", {"enabled": True}, token="s3cret")[1]["config_revision"] == 2
    assert st.unauthorised == 3


def test_api_bad_requests(api):
    _, base = api()
    url = base + "/api/v1/config/fallback"
    assert call(url, "PUT", {"enabled": True, "speed": 10}, token="s3cret")[0] == 400
    assert call(url, "PUT", {"enabled": "yes"}, token="s3cret")[0] == 400
    assert call(url, "PUT", b"not json", token="s3cret")[0] == 400
    assert call(base + "/api/v1/nope")[0] == 404
    assert call(base + "/api/v1/config/other", "PUT", {"enabled": True}, token="s3cret")[0] == 404
    assert call(base + "/api/v1/status")[1]["config_revision"] == 1


def test_api_refusing_pole(api):
    _, base = api(refuse_fallback=True)
    code, body = call(base + "/api/v1/config/fallback", "PUT", {"enabled": True}, token="s3cret")
    assert code == 409 and body["min_firmware"] == "3.2.0"
    assert call(base + "/api/v1/status")[1]["fallback"]["enabled"] is False


def test_api_pole_that_does_not_keep_the_change(api):
    _, base = api(ignore_fallback_write=True)
    code, body = call(base + "/api/v1/config/fallback", "PUT", {"enabled": True}, token="s3cret")
    assert code == 200 and body["fallback"]["enabled"] is True  # claims success...
    s = call(base + "/api/v1/status")[1]
    assert s["fallback"]["enabled"] is False and s["config_revision"] == 1  # ...the readback says no


def test_api_fallback_active_only_when_enabled_at_10_mbit(api):
    _, base = api(link_speed=10)
    call(base + "/api/v1/config/fallback", "PUT", {"enabled": True}, token="s3cret")
    assert call(base + "/api/v1/status")[1]["fallback"] == {"enabled": True, "active": True}


def test_pole_sim_serves_the_api_with_token_file(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("site-token\n")
    api_port = free_port(socket.SOCK_STREAM)
    p, rep = start_pole(tmp_path, "ddp", free_port(), "--api-port", str(api_port), "--api-listen", "127.0.0.1",
                        "--token-file", str(tok), "--ignore-fallback-write")  # fmt: skip
    try:
        base = f"http://127.0.0.1:{api_port}"
        assert call(base + "/api/v1/config/fallback", "PUT", {"enabled": True}, token="site-token")[0] == 200
        assert call(base + "/api/v1/status")[1]["fallback"]["enabled"] is False
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(10)
    r = json.loads(rep.read_text())
    assert "site-token" not in rep.read_text()
    assert r["api"]["status"]["pole_id"] == "pole-0"
