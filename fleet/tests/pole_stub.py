#!/usr/bin/env python3
"""Minimal stand-in for the pole management API v1 (docs/pole-api.md), for the fleet
tests until testbed/pole_sim.py is merged. It is a STUB: only what the fleet client
uses (GET /api/v1/status, PUT /api/v1/config/fallback with a Bearer token).

Faults for tests:
  --ignore-fallback   accept the PUT (200, echoing the requested state) but keep the
                      old state, so only a readback can notice.
Every request is appended to --log as one JSON line (method, path, authorised), never
the token itself.
"""
import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8081)
    ap.add_argument("--pole-id", default="pole-1")
    ap.add_argument("--firmware", default="3.4.1")
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--ignore-fallback", action="store_true")
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    with open(a.token_file) as f:
        token = f.read().strip()
    state = {"enabled": False, "revision": 1}
    lock = threading.Lock()

    def log(entry):
        if a.log:
            with open(a.log, "a") as f:
                f.write(json.dumps(entry) + "\n")

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            log({"method": "GET", "path": self.path})
            if self.path != "/api/v1/status":
                return self.reply(404, {"error": "unknown path"})
            with lock:
                self.reply(200, {
                    "pole_id": a.pole_id, "model": "gen3", "firmware": a.firmware,
                    "link": {"speed_mbps": 100, "duplex": "full", "carrier": True},
                    "fallback": {"enabled": state["enabled"], "active": False},
                    "config_revision": state["revision"],
                })

        def do_PUT(self):
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
            authorised = self.headers.get("Authorization") == "Bearer " + token
            log({"method": "PUT", "path": self.path, "authorised": authorised})
            if self.path != "/api/v1/config/fallback":
                return self.reply(404, {"error": "unknown path"})
            if not authorised:
                return self.reply(401, {"error": "missing or wrong token"})
            try:
                req = json.loads(raw)
            except ValueError:
                return self.reply(400, {"error": "body is not JSON"})
            if not isinstance(req, dict) or set(req) != {"enabled"} or not isinstance(req["enabled"], bool):
                return self.reply(400, {"error": "expected {\"enabled\": bool}"})
            with lock:
                if not a.ignore_fallback:
                    state["enabled"] = req["enabled"]
                    state["revision"] += 1
                self.reply(200, {"fallback": {"enabled": req["enabled"], "active": False},
                                 "config_revision": state["revision"]})

    srv = ThreadingHTTPServer((a.bind, a.port), H)
    print("ready", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
