"""A misbehaving HTTP peer for the remote-cache tests: a real server on 127.0.0.1 in its own process.

TEST STAND-IN, not a cache anyone should use. Run as a script, it serves one
request per connection and logs "METHOD PATH" per request (so tests count
requests instead of timing them). Modes:

  cache      a working Bazel-HTTP cache (GET/PUT /ac/, /cas/) backed by --store
  truncated  Content-Length 1000, then 10 bytes and close
  garbage    bytes that are not HTTP, then close
  trickle    a status line, then one header byte every 0.5 s, forever
  stall      read the request, never answer (until the client hangs up)
  500        HTTP 500 to everything
  swap       as `cache`, but GET /ac/X answers with the stored record of another key of the
             same kind (manifest or binary) whose CAS entry exists

With --tls CERT KEY it serves https. With --ping-ok the planning ping (GET /ac/000...0) gets a
cache's 404 in every mode, so the misbehaviour meets the compile actions instead.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socketserver
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

PING = "/ac/" + "0" * 64
_PATH_RE = re.compile(r"/(ac|cas)/([0-9a-f]{64})")
MODES = ("cache", "truncated", "garbage", "trickle", "stall", "500", "swap")


def _status(code: int, reason: str, body: bytes = b"") -> bytes:
    return f"HTTP/1.1 {code} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body


class _Handler(socketserver.StreamRequestHandler):
    server: "_Server"

    def handle(self) -> None:
        line = self.rfile.readline(65537).decode("latin-1").split()
        if len(line) != 3:
            return
        method, path, _ = line
        length = 0
        while True:
            header = self.rfile.readline(65537)
            if header in (b"\r\n", b"\n", b""):
                break
            name, _, value = header.decode("latin-1").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        body = self.rfile.read(length) if length else b""
        self.server.log(method, path)
        mode = self.server.mode
        if self.server.ping_ok and path == PING:
            mode = "cache"
        getattr(self, "mode_" + mode.replace("500", "error"))(method, path, body)

    # --- modes ---------------------------------------------------------------------------------------

    def mode_cache(self, method: str, path: str, body: bytes) -> None:
        match = _PATH_RE.fullmatch(path)
        if match is None:
            self.wfile.write(_status(400, "Bad Request"))
            return
        file = self.server.store / match.group(1) / match.group(2)
        if method == "PUT":
            file.parent.mkdir(parents=True, exist_ok=True)
            tmp = file.with_suffix(f".{threading.get_ident()}.tmp")
            tmp.write_bytes(body)
            os.replace(tmp, file)
            self.wfile.write(_status(201, "Created"))
        elif file.is_file():
            self.wfile.write(_status(200, "OK", file.read_bytes()))
        else:
            self.wfile.write(_status(404, "Not Found"))

    def mode_swap(self, method: str, path: str, body: bytes) -> None:
        match = _PATH_RE.fullmatch(path)
        if method != "GET" or match is None or match.group(1) != "ac":
            self.mode_cache(method, path, body)
            return
        other = self.server.other_record(match.group(2))
        self.wfile.write(_status(200, "OK", other) if other is not None else _status(404, "Not Found"))

    def mode_truncated(self, method: str, path: str, body: bytes) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)

    def mode_garbage(self, method: str, path: str, body: bytes) -> None:
        self.wfile.write(b"\x16\x03\x01\x00\xa5SSH-2.0-OpenSSH_9.6 not http at all\r\n\x00\xff\r\n\r\n")

    def mode_trickle(self, method: str, path: str, body: bytes) -> None:
        try:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Trickle: ")
            while True:
                self.wfile.write(b"a")
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            return                              # the client gave up

    def mode_stall(self, method: str, path: str, body: bytes) -> None:
        try:
            while self.request.recv(4096):      # until the client hangs up
                pass
        except OSError:
            return

    def mode_error(self, method: str, path: str, body: bytes) -> None:
        self.wfile.write(_status(500, "Internal Server Error", b"error"))


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, mode: str, store: Path, log_path: Path, ping_ok: bool, tls: tuple[str, str] | None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.socket = context.wrap_socket(self.socket, server_side=True)
        self.mode, self.store, self.ping_ok = mode, store, ping_ok
        self._log = open(log_path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def log(self, method: str, path: str) -> None:
        with self._lock:
            self._log.write(f"{method} {path}\n")
            self._log.flush()

    def other_record(self, ac: str) -> bytes | None:
        """The record of the next stored key (sorted, cyclic) whose CAS body is of the same kind."""
        def kind(name: str) -> bool | None:
            try:
                cas = json.loads((self.store / "ac" / name).read_bytes())["cas"]
                return (self.store / "cas" / cas).read_bytes().startswith(b"\x7fELF")
            except (OSError, ValueError, KeyError):
                return None
        names = sorted(p.name for p in (self.store / "ac").glob("*") if len(p.name) == 64)
        if ac not in names:
            return None
        mine = kind(ac)
        same = [n for n in names if n != ac and kind(n) == mine and mine is not None]
        if not same:
            return None
        after = [n for n in same if n > ac]
        return (self.store / "ac" / (after or same)[0]).read_bytes()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=MODES, required=True)
    p.add_argument("--store", type=Path, required=True)
    p.add_argument("--log", type=Path, required=True)
    p.add_argument("--port-file", type=Path, required=True)
    p.add_argument("--ping-ok", action="store_true")
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), default=None, help="serve https")
    args = p.parse_args()
    server = _Server(args.mode, args.store, args.log, args.ping_ok, args.tls)
    tmp = args.port_file.with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    os.replace(tmp, args.port_file)
    server.serve_forever()


class Peer:
    """The peer as a subprocess: `url`, `requests()` (method, path) so far, `stop()`."""

    def __init__(self, workdir: Path, mode: str, *, ping_ok: bool = False, store: Path | None = None,
                 tls: tuple[Path, Path] | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.store = store or workdir / "store"
        self.store.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"requests-{mode}.log"
        self.log.write_text("")
        port_file = workdir / f"port-{mode}"
        port_file.unlink(missing_ok=True)
        argv = [sys.executable, __file__, "--mode", mode, "--store", str(self.store), "--log", str(self.log),
                "--port-file", str(port_file), *(["--ping-ok"] if ping_ok else []),
                *(["--tls", str(tls[0]), str(tls[1])] if tls else [])]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"remote_peer {mode} did not start")
            time.sleep(0.02)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{port_file.read_text()}"

    def requests(self) -> list[tuple[str, str]]:
        return [tuple(line.split(" ", 1)) for line in self.log.read_text().splitlines()]

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


if __name__ == "__main__":
    main()
