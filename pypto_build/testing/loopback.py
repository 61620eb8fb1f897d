"""Real servers on 127.0.0.1 for tests and benchmarks: distccd (and its log), nginx as a Bazel-HTTP cache.

TEST AND BENCHMARK HELPER. Each server listens on loopback only, on a free
port, in a session of its own; leaving the `with` block stops the whole
session (SIGTERM, then SIGKILL) and waits for it, whatever happened inside.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from ..core import procs

START_S = 10.0
STOP_S = 5.0
_JOB = re.compile(r"COMPILE_OK .* (\S+)$")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, log: Path | None = None) -> None:
    """Return once `port` accepts connections; RuntimeError (with the log's tail) if `proc` exits or it takes
    longer than START_S."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    said = log.read_text(errors="replace")[-2000:] if log is not None and log.exists() else ""
    raise RuntimeError(f"{what} did not start on 127.0.0.1:{port} (exit status {proc.poll()}): {said}")


def stop(proc: subprocess.Popen) -> None:
    """Stop `proc`'s whole session (started by `procs.start`): SIGTERM, then SIGKILL after STOP_S; reaped."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    procs.stop(proc, STOP_S)


@dataclass
class Distccd:
    """A running distccd: where clients send jobs (`env`) and which jobs it compiled (its own log)."""

    port: int
    log: Path
    client_dir: Path

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self, hosts: str | None = None) -> dict[str, str]:
        """The client's environment: this server only (or `hosts`), its own state folder (distcc keeps
        per-host backoff there: a dead host in one test must not slow another)."""
        return {"DISTCC_HOSTS": self.hosts if hosts is None else hosts, "DISTCC_DIR": str(self.client_dir)}

    def compiled(self) -> list[str]:
        """The source of every job distccd finished with COMPILE_OK, in order (from its log)."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return [m.group(1) for m in map(_JOB.search, text.splitlines()) if m]


def distccd_path() -> str | None:
    return shutil.which("distccd")


@contextmanager
def distccd(where: Path, jobs: int = 4, compilers: Sequence[str] = ()) -> Iterator[Distccd]:
    """A real distccd serving 127.0.0.1 only, at most `jobs` compiles at once, each job logged (notice
    level: one COMPILE_OK line per job) to `where`/distccd.log. It runs the compilers Debian's
    /usr/lib/distcc lists, or only `compilers` (full paths, asked for by base name: distccd's
    DISTCC_CMDLIST), e.g. simpler's `g++-15` in a venv."""
    exe = distccd_path()
    if exe is None:
        raise RuntimeError("distccd is not installed (apt-get install distcc)")
    where.mkdir(parents=True, exist_ok=True)
    server = Distccd(free_port(), where / "distccd.log", where / "distcc-client")
    server.client_dir.mkdir(exist_ok=True)          # distcc falls back to local compiles without it
    argv = [exe, "--daemon", "--no-detach", "--listen", "127.0.0.1", "--allow", "127.0.0.1/32", "--port",
            str(server.port), "--jobs", str(jobs), "--job-lifetime", "600", "--log-stderr", "--log-level=notice"]
    env = dict(os.environ)
    if compilers:
        allowed = where / "cmdlist"
        allowed.write_text("".join(f"{c}\n" for c in compilers))
        env.update(DISTCC_CMDLIST=str(allowed), DISTCC_CMDLIST_NUMWORDS="1")
    with open(server.log, "ab") as log:
        proc = procs.start(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    try:
        wait_for_port(server.port, proc, "distccd", server.log)
        yield server
    finally:
        stop(proc)


def nginx_path() -> str | None:
    return shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)


@contextmanager
def nginx_cache(where: Path) -> Iterator[tuple[str, Path]]:
    """A real nginx serving GET and WebDAV PUT on 127.0.0.1 from `where`/store: a Bazel-HTTP cache (the
    configuration docs/ci.md shows); yields (url, store)."""
    exe = nginx_path()
    if exe is None:
        raise RuntimeError("nginx is not installed (apt-get install nginx-light)")
    store = where / "store"
    for d in ("store/ac", "store/cas", "tmp"):
        (where / d).mkdir(parents=True, exist_ok=True)
    port = free_port()
    temps = "".join(f"{k}_temp_path {where / 'tmp' / k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                      "scgi"))
    conf = where / "nginx.conf"
    user = "user root; " if os.getuid() == 0 else ""
    conf.write_text(f"""{user}worker_processes 1; daemon off; pid {where / 'nginx.pid'}; error_log {where / 'error.log'};
events {{}}
http {{ access_log off; {temps}
  server {{ listen 127.0.0.1:{port}; root {store}; client_max_body_size 0;
    location / {{ dav_methods PUT; create_full_put_path on; dav_access user:rw group:r all:r; }} }} }}
""")
    proc = procs.start([exe, "-c", str(conf), "-p", str(where)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, "nginx", where / "error.log")
        yield f"http://127.0.0.1:{port}", store
    finally:
        stop(proc)
