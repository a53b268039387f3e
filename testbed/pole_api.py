"""The pole management API of docs/pole-api.md, served by the pole simulator.

State lives in `PoleState` (pure, lock-protected); `serve()` puts a ThreadingHTTPServer in front
of it. Fault modes let fleet tests make a pole that refuses the change (409) or that answers 200
but does not keep it (a readback shows the old state).
"""

from __future__ import annotations

import hmac
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MIN_FIRMWARE_FOR_FALLBACK = "3.2.0"


class PoleState:
    def __init__(
        self,
        pole_id: str,
        model: str = "gen3",
        firmware: str = "3.4.1",
        link_speed: int = 100,
        fallback_enabled: bool = False,
        config_revision: int = 1,
        token: str | None = None,
        refuse_fallback: bool = False,
        ignore_fallback_write: bool = False,
    ):
        self.pole_id = pole_id
        self.model = model
        self.firmware = firmware
        self.link_speed = link_speed
        self.fallback_enabled = fallback_enabled
        self.config_revision = config_revision
        self._token = token
        self.refuse_fallback = refuse_fallback
        self.ignore_fallback_write = ignore_fallback_write
        self.lock = threading.Lock()
        self.changes_accepted = 0
        self.changes_refused = 0
        self.unauthorised = 0

    def fallback(self, enabled: bool | None = None) -> dict:
        en = self.fallback_enabled if enabled is None else enabled
        # The pole runs at 10 Mbit/s because of the fallback only if the fallback is allowed.
        return {"enabled": en, "active": bool(en and self.link_speed == 10)}

    def status(self) -> dict:
        with self.lock:
            return {
                "pole_id": self.pole_id,
                "model": self.model,
                "firmware": self.firmware,
                "link": {"speed_mbps": self.link_speed, "duplex": "full", "carrier": True},
                "fallback": self.fallback(),
                "config_revision": self.config_revision,
            }

    def authorised(self, header: str | None) -> bool:
        if self._token is None or header is None or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[len("Bearer ") :].encode(), self._token.encode())

    def put_fallback(self, body: object) -> tuple[int, dict]:
        """Returns (HTTP status, JSON body). The caller has checked the token."""
        if not isinstance(body, dict):
            return 400, {"error": "body must be a JSON object like {\"enabled\": true}"}
        unknown = sorted(set(body) - {"enabled"})
        if unknown:
            return 400, {"error": f"unknown field(s): {', '.join(unknown)}"}
        if not isinstance(body.get("enabled"), bool):
            return 400, {"error": "`enabled` must be true or false"}
        with self.lock:
            if self.refuse_fallback:
                self.changes_refused += 1
                return 409, {
                    "error": "fallback change refused: firmware too old",
                    "min_firmware": MIN_FIRMWARE_FOR_FALLBACK,
                }
            if self.ignore_fallback_write:
                # Fault mode: claims success, keeps nothing. Only a readback can tell.
                return 200, {"fallback": self.fallback(body["enabled"]), "config_revision": self.config_revision + 1}
            if body["enabled"] != self.fallback_enabled:
                self.fallback_enabled = body["enabled"]
                self.config_revision += 1
            self.changes_accepted += 1
            return 200, {"fallback": self.fallback(), "config_revision": self.config_revision}

    def counters(self) -> dict:
        with self.lock:
            return {
                "changes_accepted": self.changes_accepted,
                "changes_refused": self.changes_refused,
                "unauthorised": self.unauthorised,
            }


def make_handler(state: PoleState):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "pfx-pole-sim/1"

        def log_message(self, fmt, *args):  # never log headers (the token); stay quiet
            pass

        def _send(self, code: int, body: dict) -> None:
            raw = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _read_body(self) -> bytes:
            n = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(n) if n > 0 else b""

        def do_GET(self):
            if self.path == "/api/v1/status":
                self._send(200, state.status())
            else:
                self._send(404, {"error": f"unknown path {self.path}"})

        def _change(self):
            raw = self._read_body()
            if not state.authorised(self.headers.get("Authorization")):
                with state.lock:
                    state.unauthorised += 1
                self._send(401, {"error": "missing or wrong site token"})
                return
            if self.command != "PUT" or self.path != "/api/v1/config/fallback":
                self._send(404, {"error": f"unknown path {self.command} {self.path}"})
                return
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                self._send(400, {"error": f"body is not JSON: {e}"})
                return
            code, out = state.put_fallback(body)
            self._send(code, out)

        do_PUT = _change
        do_POST = _change

    return Handler


def serve(state: PoleState, host: str, port: int) -> ThreadingHTTPServer:
    srv = ThreadingHTTPServer((host, port), make_handler(state))
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, name="pole-api", daemon=True).start()
    return srv
