#!/usr/bin/env python3
"""An FPP Connect client that behaves like xLights, written from xLights' own source (not from
pfx's code), to put a sequence on a unit the way xLights does. Each behaviour names the xLights
file and function it follows: FPP.cpp is src-core/controllers/FPP.cpp, FPPConnectDialog.cpp is
src-ui-wx/controllers/FPPConnectDialog.cpp (xLights 2026). docs/fpp-connect.md section 1 says
the same in prose.

    fpp_connect_client.py discover [--bind ADDR] [--target ADDR ...] [--mdns] [--seconds S]
    fpp_connect_client.py push --unit ADDR --password PW --fseq FILE [--name NAME]
                               [--sparse RANGES|--sparse-from-unit] [--playlist NAME]
    fpp_connect_client.py status --unit ADDR --password PW

Library use (the end-to-end suite): `ping_discover`, `mdns_discover`, `Unit` (HTTP with the
401 -> Basic credentials retry), `Unit.upload` (16 MiB PATCH chunks, restart from 0 on a
non-200, 3 restarts), `Unit.post_playlist` (GET, merge, POST), `write_fseq` (an FSEQ v2
writer, full or sparse, uncompressed: one of the forms xLights offers).

Only the standard library, but for mDNS, which uses python-zeroconf (a browser we did not
write) when it is installed.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import socket
import struct
import sys
import time
import urllib.parse

PORT = 32320
GROUP = "239.70.80.80"
CHUNK = 16 * 1024 * 1024
PING_V2_LEN = 207


# ---------------------------------------------------------------- discovery: MultiSync ping


def discover_ping_packet() -> bytes:
    """A version 2 discover ping as xLights sends it: 207 bytes, address 0.0.0.0
    (FPP.cpp, FillFPPPingBuffer; sent by FPP::PrepareDiscovery)."""
    b = bytearray(PING_V2_LEN)
    b[0:4] = b"FPPD"
    b[4] = 4  # ping
    struct.pack_into("<H", b, 5, PING_V2_LEN - 7)
    b[7] = 2  # ping version
    b[8] = 1  # discover: answer me
    b[9] = 0xC0  # xLights' own system type
    struct.pack_into(">H", b, 10, 2026)  # FillFPPPingBuffer: major big-endian,
    b[12], b[13] = 0, 1  # minor in byte 13 alone
    b[14] = 0
    ver = b"2026.1"
    b[84 : 84 + len(ver)] = ver
    return bytes(b)


def _cstr(b: bytes) -> str:
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse_ping(data: bytes) -> dict | None:
    """The fields xLights reads from a ping answer, or None if it is not one it would use
    (FPP.cpp, ProcessFPPPingPacket: magic and type 4, address not 0.0.0.0; it checks no
    length, reading from its 1500-byte buffer; the length check here is this client's own,
    so a short datagram is not read past its end)."""
    if len(data) < 7 or data[0:4] != b"FPPD" or data[4] != 4:
        return None
    (length,) = struct.unpack_from("<H", data, 5)
    if len(data) != 7 + length or len(data) < 165:
        return None
    ip = ".".join(str(x) for x in data[15:19])
    if ip == "0.0.0.0":
        return None
    # ProcessFPPPingPacket's switch on byte 14; other values leave the mode unset.
    mode = {1: "bridge", 2: "player", 4: "master", 6: "master", 8: "remote"}.get(data[14], "")
    return {
        "ping_version": data[7],
        "discover": data[8],
        "type_id": data[9],
        "major": struct.unpack_from(">H", data, 10)[0],
        "minor": struct.unpack_from(">H", data, 12)[0],
        "mode_byte": data[14],
        "mode": mode,
        "ip": ip,
        "hostname": _cstr(data[19:83]),
        "version": _cstr(data[84:124]),
        "model": _cstr(data[125:165]),
        # ProcessFPPPingPacket ignores "0-0".
        "ranges": (lambda r: "" if r == "0-0" else r)(_cstr(data[166:286]) if len(data) >= 286 else ""),
        "length": len(data),
    }


def ping_discover(bind: str = "0.0.0.0", targets: list[str] | None = None, seconds: float = 1.5) -> list[dict]:
    """Bind 32320, join 239.70.80.80, send the discover ping to broadcast, the group and each
    target, and collect the answers (one per address) (FPP.cpp, FPP::PrepareDiscovery:
    SendBroadcastData, SendData to the group, then to each listed address)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
    s.bind(("0.0.0.0", PORT))
    iface = socket.inet_aton(bind)
    try:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(GROUP) + iface)
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, iface)
    except OSError as e:
        print(f"warning: cannot join {GROUP}: {e}", file=sys.stderr)
    pkt = discover_ping_packet()
    for dst in ["255.255.255.255", GROUP] + list(targets or []):
        try:
            s.sendto(pkt, (dst, PORT))
        except OSError as e:
            print(f"warning: ping to {dst}: {e}", file=sys.stderr)
    found: dict[str, dict] = {}
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        s.settimeout(left)
        try:
            data, src = s.recvfrom(2048)
        except socket.timeout:
            break
        p = parse_ping(data)
        if p is not None:
            p["from"] = src[0]
            found.setdefault(p["ip"], p)
    s.close()
    return list(found.values())


def mdns_discover(seconds: float = 3.0) -> list[str]:
    """IPv4 addresses of `_fppd._udp` instances (python-zeroconf) (FPP.cpp,
    FPP::PrepareDiscovery: AddBonjour("_fppd._udp"))."""
    from zeroconf import ServiceBrowser, ServiceListener, Zeroconf  # noqa: PLC0415

    addrs: set[str] = set()

    class L(ServiceListener):
        def add_service(self, zc, type_, name):
            info = zc.get_service_info(type_, name, timeout=2000)
            if info:
                for a in info.parsed_addresses():
                    if ":" not in a:
                        addrs.add(a)

        def update_service(self, zc, type_, name):
            self.add_service(zc, type_, name)

        def remove_service(self, zc, type_, name):
            pass

    zc = Zeroconf()
    try:
        ServiceBrowser(zc, "_fppd._udp.local.", L())
        end = time.monotonic() + seconds
        while time.monotonic() < end and not addrs:
            time.sleep(0.1)
        time.sleep(0.2)
    finally:
        zc.close()
    return sorted(addrs)


# ---------------------------------------------------------------- HTTP with xLights' 401 handling


class Unit:
    """One unit over HTTP on port 80 (or `port`). A 401 is answered, once, with Basic
    credentials (user `admin` unless told), as xLights does after prompting the user
    (FPP.cpp, FPP::GetURLAsString: on 401 the auth delegate's PromptForPassword, then the
    request again). Non-200 GETs are recorded in `messages` as xLights records them for
    its "Problems Uploading" box (GetURLAsString with recordError)."""

    def __init__(self, host: str, password: str | None, user: str = "admin", port: int = 80, timeout: float = 180,
                 source: str | None = None):
        self.host, self.port, self.timeout = host, port, timeout
        self.source = (source, 0) if source else None
        self.user, self.password = user, password
        self.auth: str | None = None  # set after the first 401, then sent on every request
        self.log: list[tuple[str, str, int]] = []
        # FPP::messages: what FPPConnectDialog::doUpload shows in "Problems Uploading".
        self.messages: list[str] = []

    def _once(self, method: str, path: str, body: bytes | None, headers: dict) -> tuple[int, dict, bytes]:
        c = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout, source_address=self.source)
        h = dict(headers)
        if self.auth:
            h["Authorization"] = self.auth
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        headers = headers or {}
        st, h, data = self._once(method, path, body, headers)
        if st == 401 and self.password is not None and self.auth is None:
            tok = base64.b64encode(f"{self.user}:{self.password}".encode()).decode()
            self.auth = "Basic " + tok
            st, h, data = self._once(method, path, body, headers)
        self.log.append((method, path, st))
        return st, h, data

    def get_json(self, path: str, record_error: bool = True):
        """FPP.cpp, FPP::GetURLAsJSON (recordError defaults to true)."""
        st, _, data = self.request("GET", path)
        if st != 200:
            if record_error:
                self.messages.append(f'ERROR - Error on GET "{path}"    Response Code: {st}')
            return st, None
        try:
            return st, json.loads(data)
        except ValueError:
            return st, None

    # -- discovery probes
    def probe(self, ping_type: int | None = None) -> dict:
        """multiSyncSystems and system/info; whether xLights would offer FPP Connect.
        FPP.cpp: ProcessFPPSystems, ProcessFPPSysinfo (only system/info with a non-empty
        `uuid` or `UUID` sets httpConnected), supportedForFPPConnect (type 1..0x7F and
        httpConnected), FPP::supportedForFPPConnect (version >= 7.1)."""
        st1, systems = self.get_json("/api/fppd/multiSyncSystems", record_error=False)
        st2, info = self.get_json("/api/system/info", record_error=False)
        info = info or {}
        major = info.get("majorVersion")
        minor = info.get("minorVersion")
        ver = info.get("Version", "")
        if not isinstance(major, int) and ver:
            major = int("".join(ch for ch in ver.split(".")[0] if ch.isdigit()) or 0)
        if not isinstance(minor, int):
            minor = 0
        # ProcessFPPSysinfo reads typeId only under a check for the key "typId", so system
        # info's typeId is never read: the type is the ping's, else multiSyncSystems'.
        type_id = ping_type
        if type_id is None and isinstance(systems, dict):
            for sy in systems.get("systems", []):
                if isinstance(sy, dict) and isinstance(sy.get("typeId"), int):
                    type_id = sy["typeId"]
                    break
        uuid = info.get("uuid") or info.get("UUID") or ""
        http_ok = st2 == 200 and isinstance(uuid, str) and uuid != ""
        supported = http_ok and 0 < int(type_id or 0) < 0x80 and (major or 0, minor) >= (7, 1)
        # ProcessFPPSysinfo: Mode as is, "player w/multisync" when multisync is true.
        mode = info.get("Mode", "")
        if mode == "player" and info.get("multisync") is True:
            mode += " w/multisync"
        # FPPConnectDialog::PopulateFPPInstanceList: full file only for mode "master".
        form = "V2 zstd" if mode == "master" else "V2 Sparse/zstd"
        # FPPConnectDialog::doUpload: co-pixelStrings probe (FPP::probePixelControllerType).
        self.get_json("/api/channel/output/co-pixelStrings", record_error=False)
        return {"systems": systems, "info": info, "http_ok": http_ok, "supported": supported,
                "status": (st1, st2), "mode": mode, "default_form": form}

    # -- 1.3
    def meta(self, name: str):
        """FPP.cpp, FPP::PrepareUploadSequence: GetURLAsJSON(.../meta, recordError false)."""
        st, m = self.get_json("/api/sequence/" + urllib.parse.quote(name, safe="") + "/meta", record_error=False)
        return m if st == 200 else None

    def media_meta(self, name: str):
        """FPP.cpp, FPP::CheckUploadMedia: GET /api/media/NAME/meta, skip when format.size
        equals the local file's size (an int or a string, GetJSONIntValueFromString)."""
        st, _, data = self.request("GET", "/api/media/" + urllib.parse.quote(name, safe="") + "/meta")
        if st != 200:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return None

    # -- 1.6
    def upload_udp_out(self, table: dict):
        """FPP.cpp, FPP::UploadUDPOut: GET universeOutputs (a non-200 is recorded), copy the
        keys xLights does not own from each `universes` entry, POST (answer not read)."""
        st, orig = self.get_json("/api/channel/output/universeOutputs")
        new = json.loads(json.dumps(table))
        owned = {"type", "enabled", "timeout", "startChannel", "channelCount", "universes"}
        if isinstance(orig, dict) and isinstance(orig.get("channelOutputs"), list):
            for co in orig["channelOutputs"]:
                if isinstance(co, dict) and co.get("type") == "universes":
                    for k, v in co.items():
                        if k not in owned:
                            new["channelOutputs"][0][k] = v
        pst, _, _ = self.request("POST", "/api/channel/output/universeOutputs",
                                 body=json.dumps(new, indent=3).encode(), headers={"Content-Type": "application/json"})
        return st, pst

    def update_channel_ranges(self, ranges: str, max_spins: int = 1000):
        """FPP.cpp, FPP::UpdateChannelRanges: GET system/info until it has channelRanges; a
        missing key is retried 20 times 100 ms apart; a present but empty one is retried at
        once without counting, which in xLights never ends: here `max_spins` ends it and
        the result says so. Then the ranges are merged (set_new_ranges)."""
        count = spins = 0
        while count < 20:
            st, info = self.get_json("/api/system/info", record_error=False)
            if st == 200 and isinstance(info, dict):
                if "channelRanges" in info:
                    r = info["channelRanges"] if isinstance(info["channelRanges"], str) else ""
                    if r:
                        merged = set_new_ranges(fill_ranges((ranges + "," if ranges else "") + r))
                        return {"ranges": merged, "hung": False}
                    spins += 1
                    if spins >= max_spins:
                        return {"ranges": ranges, "hung": True}
                    continue
            count += 1
            time.sleep(0.1)
        return {"ranges": ranges, "hung": False}

    # -- 1.4
    def upload(self, name: str, data: bytes, chunk: int = CHUNK, dir_: str = "sequences", tries: int = 3):
        """PATCH chunks from offset 0; any non-200 restarts from 0, at most `tries` restarts
        (FPP.cpp, FPP::uploadFileV7 and prepareCurlForMulti: 16 MiB blocks, the headers
        below, errorCount < 3). Returns (ok, statuses of every chunk request); a failure
        is recorded as xLights records it."""
        statuses: list[int] = []
        offset, errors = 0, 0
        while offset < len(data) or (len(data) == 0 and not statuses):
            piece = data[offset : offset + chunk]
            st, _, body = self.request(
                "PATCH",
                "/api/file/" + dir_,
                body=piece,
                headers={
                    "Content-Type": "application/offset+octet-stream",
                    "X-Requested-With": "FPPConnect",
                    "Upload-Offset": str(offset),
                    "Upload-Length": str(len(data)),
                    "Upload-Name": name,
                    "Content-Length": str(len(piece)),
                },
            )
            statuses.append(st)
            if st != 200:
                if errors < tries:
                    errors += 1
                    offset = 0
                    continue
                self.messages.append(f"ERROR Uploading file: {name}. Response code: {st}")
                return False, statuses
            offset += len(piece)
            if len(data) == 0:
                break
        return True, statuses

    # -- 1.5
    def post_playlist(self, name: str, sequences: list[tuple[str, float]], query: str = ""):
        """FPP.cpp, FPP::UploadPlaylist (with PlaylistContainsEntry): GET the playlist (not
        recorded), add each sequence not in mainPlaylist, POST. FPPConnectDialog::doUpload
        calls it before the uploads (no sequences known yet: a new playlist goes out with
        "mainPlaylist": null, as nlohmann's operator[] makes it) and after them. `query`
        (e.g. "?switch=now") is pfx's own, not xLights'."""
        path = "/api/playlist/" + urllib.parse.quote(name, safe="")
        st, pl = self.get_json(path, record_error=False)
        if not isinstance(pl, dict):
            pl = {}
        main = pl.get("mainPlaylist")
        if not isinstance(main, list):
            main = [] if sequences else None
        for seq, duration in sequences:
            if not any(e.get("sequenceName") == seq and e.get("type") == "sequence" for e in main if isinstance(e, dict)):
                main.append({"type": "sequence", "enabled": 1, "playOnce": 0, "sequenceName": seq, "duration": duration})
        pl["mainPlaylist"] = main
        pl.pop("playlistInfo", None)
        pl["name"] = name
        pl.setdefault("random", 0)
        pl["playlistInfo"] = {"total_items": len(main or []),
                              "total_duration": sum(float(e.get("duration", 0) or 0) for e in main or [])}
        st, _, body = self.request("POST", path + query, body=json.dumps(pl, indent=3).encode(),
                                   headers={"Content-Type": "application/json"})
        return st, body

    def status(self):
        return self.get_json("/api/fppd/status")


def fill_ranges(text: str) -> dict[int, int]:
    """FPP.cpp, FPP::FillRanges: `a-b` -> {a: b - a + 1}; a lone number counts 4."""
    out: dict[int, int] = {}
    for part in text.split(","):
        if not part:
            continue
        r = part.split("-")
        try:
            start = int(r[0])
            out[start] = int(r[1]) - start + 1 if len(r) == 2 else 4
        except ValueError:
            continue
    return out


def set_new_ranges(rngs: dict[int, int]) -> str:
    """FPP.cpp, FPP::SetNewRanges, test included: a range starting below
    curFirst + curLast - 1 is folded in, so ranges that are not adjacent are joined."""
    out: list[str] = []
    first = last = -1
    for s in sorted(rngs):
        n = rngs[s]
        if first == -1:
            first, last = s, s + n - 1
        elif s == last + 1:
            last += n
        elif s < first + last - 1:
            last = max(last, s + n - 1)
        else:
            out.append(f"{first}-{last}")
            first, last = s, s + n - 1
    if first != -1:
        out.append(f"{first}-{last}")
    return ",".join(out)


# ---------------------------------------------------------------- FSEQ v2 (what xLights would send)


def parse_ranges(text: str) -> list[tuple[int, int]]:
    """`start-end,start-end` (0-based, end inclusive) -> [(start, length)], as xLights does."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.append((int(a), int(b) - int(a) + 1))
        else:
            out.append((int(part), 4))
    return out


def write_fseq(frames: list[bytes] | None, channels: int, step_ms: int, unique_id: int,
               sparse: list[tuple[int, int]] | None = None, frame_fn=None, nframes: int | None = None) -> bytes:
    """FSEQ 2.0, uncompressed. `frames` (or `frame_fn(i)` for `nframes`) hold full frames of
    `channels` bytes; with `sparse`, only those ranges are stored, one after another."""
    n = len(frames) if frames is not None else int(nframes or 0)
    ranges = sparse or []
    stored = sum(length for _, length in ranges) if ranges else channels
    fixed = 32 + 6 * len(ranges)
    var = b""
    sp = b"pfx fpp_connect_client\0"
    var += struct.pack("<H", 4 + len(sp)) + b"sp" + sp
    data_offset = fixed + len(var)
    hdr = bytearray(32)
    hdr[0:4] = b"PSEQ"
    struct.pack_into("<H", hdr, 4, data_offset)
    hdr[6] = 0  # minor
    hdr[7] = 2  # major
    struct.pack_into("<H", hdr, 8, fixed)
    struct.pack_into("<I", hdr, 10, stored)
    struct.pack_into("<I", hdr, 14, n)
    hdr[18] = step_ms
    hdr[19] = 0
    hdr[20] = 0  # no compression, no blocks
    hdr[21] = 0
    hdr[22] = len(ranges)
    struct.pack_into("<Q", hdr, 24, unique_id)
    out = bytearray(hdr)
    for start, length in ranges:
        out += start.to_bytes(3, "little") + length.to_bytes(3, "little")
    out += var
    for i in range(n):
        f = frames[i] if frames is not None else frame_fn(i)
        if ranges:
            out += b"".join(f[s : s + length] for s, length in ranges)
        else:
            out += f[:channels]
    return bytes(out)


def fseq_summary(b: bytes) -> dict:
    """What xLights compares (1.3), read from a file we wrote."""
    (stored,) = struct.unpack_from("<I", b, 10)
    (frames,) = struct.unpack_from("<I", b, 14)
    (uid,) = struct.unpack_from("<Q", b, 24)
    nr = b[22]
    ranges = []
    for i in range(nr):
        o = 32 + 6 * i
        ranges.append((int.from_bytes(b[o : o + 3], "little"), int.from_bytes(b[o + 3 : o + 6], "little")))
    return {"Version": f"{b[7]}.{b[6]}", "ID": str(uid), "NumFrames": frames, "StepTime": b[18],
            "ChannelCount": stored, "CompressionType": b[20] & 0x0F, "Ranges": ranges}


def needs_upload(meta: dict | None, local: dict, sparse_ranges: list[tuple[int, int]] | None) -> bool:
    """xLights' skip-if-unchanged comparison (1.3)."""
    if meta is None:
        return True
    if str(meta.get("Version", "")).startswith("1"):
        return True
    if meta.get("CompressionType", 1) != local["CompressionType"]:
        return True
    if meta.get("ID") != local["ID"] or meta.get("NumFrames") != local["NumFrames"]:
        return True
    if meta.get("StepTime") != local["StepTime"]:
        return True
    theirs = [(r.get("Start"), r.get("Length")) for r in meta.get("Ranges", []) or []]
    if sparse_ranges is not None:
        return theirs != list(sparse_ranges)
    if meta.get("ChannelCount") != local["ChannelCount"]:
        return True
    return bool(theirs) and theirs != local["Ranges"]


# ---------------------------------------------------------------- command line


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("discover")
    d.add_argument("--bind", default="0.0.0.0", help="local address of the interface to join the group on")
    d.add_argument("--target", action="append", default=[])
    d.add_argument("--mdns", action="store_true")
    d.add_argument("--seconds", type=float, default=1.5)
    p = sub.add_parser("push")
    p.add_argument("--unit", required=True)
    p.add_argument("--port", type=int, default=80)
    p.add_argument("--password")
    p.add_argument("--fseq", required=True)
    p.add_argument("--name")
    p.add_argument("--playlist")
    p.add_argument("--sparse", help="channel ranges start-end,... (0-based); the file must already be sparse")
    s = sub.add_parser("status")
    s.add_argument("--unit", required=True)
    s.add_argument("--port", type=int, default=80)
    s.add_argument("--password")
    a = ap.parse_args(argv)
    if a.cmd == "discover":
        out = {"ping": ping_discover(a.bind, a.target, a.seconds)}
        if a.mdns:
            out["mdns"] = mdns_discover()
        print(json.dumps(out, indent=2))
        return 0
    u = Unit(a.unit, a.password, port=a.port)
    if a.cmd == "status":
        st, j = u.status()
        print(json.dumps({"http": st, "status": j}, indent=2))
        return 0 if st == 200 else 1
    data = open(a.fseq, "rb").read()
    name = a.name or a.fseq.rsplit("/", 1)[-1]
    local = fseq_summary(data)
    sparse = parse_ranges(a.sparse) if a.sparse else None
    if needs_upload(u.meta(name), local, sparse):
        ok, sts = u.upload(name, data)
        print(f"upload {name}: {'ok' if ok else 'FAILED'} {sts}")
        if not ok:
            return 1
    else:
        print(f"{name}: unchanged on the unit, not uploaded")
    if a.playlist:
        st, body = u.post_playlist(a.playlist, [(name, local["NumFrames"] * local["StepTime"] / 1000.0)])
        print(f"playlist {a.playlist}: HTTP {st}")
        return 0 if st == 200 else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
