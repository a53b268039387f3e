"""The real pfx-player to the pole simulators on loopback: each pole's decoder, written from
the protocol documents (docs/protocols/bigpacket.md, the DDP spec, E1.31), receives whole
frames whose pixels are exactly what the show says, in the pole's colour order.
Needs PFX_PLAYER (scripts/test-all sets it); without it the test says so and is skipped."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from test_pole_sim import free_port, start_pole

REPO = Path(__file__).resolve().parents[2]
PLAYER = os.environ.get("PFX_PLAYER")


@pytest.mark.skipif(not PLAYER, reason="skipped: PFX_PLAYER not set (the player binary to test)")
def test_player_frames_decoded_by_spec_receivers(tmp_path):
    ports = {"bigpacket": free_port(), "sacn": free_port(), "ddp": free_port()}
    extra = {"sacn": ["--first-universe", "1", "--universes", "2"], "bigpacket": ["--pole-id", "0"], "ddp": []}
    poles = {
        proto: start_pole(tmp_path, proto, port, "--pixels", "300", "--dump-frames",
                          str(tmp_path / f"{proto}.frames"), *extra[proto])  # fmt: skip
        for proto, port in ports.items()
    }
    show = tmp_path / "show.yaml"
    show.write_text(f"""interface: lo
http: 127.0.0.1:{free_port(1)}
profiles_dir: {REPO / 'profiles'}
unit_id: e2e-poles
outputs:
  - name: gen3
    profile: gen3-bigpacket
    destination: 127.0.0.1:{ports['bigpacket']}
  - name: legacy
    profile: legacy-2018-2023-sacn
    destination: 127.0.0.1:{ports['sacn']}
    start_channel: 901
  - name: bench
    profile: bench-ddp
    destination: 127.0.0.1:{ports['ddp']}
    start_channel: 1801
content:
  playlist:
    - pattern: solid
      color: "#102030"
      seconds: 60
""")
    player = subprocess.run([PLAYER, "run", "--no-mdns", "--config", str(show), "--duration", "3"],
                            capture_output=True, text=True, timeout=30)  # fmt: skip
    assert player.returncode == 0, player.stderr
    # No wait: the datagrams are queued at the poles; a stopped pole reads them first.
    # Wire order per profile: gen3 is GRB, the sACN and DDP poles RGB.
    want = {"bigpacket": bytes([0x20, 0x10, 0x30]) * 300, "sacn": bytes([0x10, 0x20, 0x30]) * 300,
            "ddp": bytes([0x10, 0x20, 0x30]) * 300}  # fmt: skip
    for proto, (p, rep) in poles.items():
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
        r = json.loads(rep.read_text())
        assert r["ok"], (proto, r)
        assert r["frames"] >= 120, (proto, r["frames"])
        assert r["torn_frames"] == 0 and not r["malformed"], (proto, r)
        assert r.get("checksum_failures", 0) == 0, (proto, r)
        lines = (tmp_path / f"{proto}.frames").read_text().splitlines()
        assert lines, proto
        for line in lines:
            px = bytes.fromhex(json.loads(line)["pixels"])
            assert px[:900] == want[proto], (proto, px[:12].hex())
    ddp = json.loads((tmp_path / "ddp.json").read_text())["ddp"]
    assert list(ddp["data_types"]) == ["0x0b"], ddp
