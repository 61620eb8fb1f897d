"""The remote cache against a real HTTP cache server on loopback (nginx with WebDAV PUT).

nginx comes from Debian's packages (`.ci/run` installs nginx-light); without it
these tests skip — they never pass without a real server.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from pypto_build import synth
from pypto_build.api import build

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx not installed (apt-get install nginx-light)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """A real nginx serving GET and WebDAV PUT on 127.0.0.1 from a temp store; yields (url, store)."""
    base = tmp_path / "nginx"
    store = base / "store"
    for d in ("store/ac", "store/cas", "tmp"):
        (base / d).mkdir(parents=True)
    port = free_port()
    temps = "".join(f"{k}_temp_path {base / 'tmp' / k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf = base / "nginx.conf"
    conf.write_text(f"""user root; worker_processes 1; daemon off; pid {base / 'nginx.pid'}; error_log {base / 'error.log'};
events {{}}
http {{ access_log off; {temps}
  server {{ listen 127.0.0.1:{port}; root {store}; client_max_body_size 0;
    location / {{ dav_methods PUT; create_full_put_path on; dav_access user:rw group:r all:r; }} }} }}
""")
    proc = subprocess.Popen([NGINX, "-c", str(conf), "-p", str(base)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail(f"nginx did not start: {proc.stderr.read().decode(errors='replace')}")
    yield f"http://127.0.0.1:{port}", store
    proc.terminate()
    proc.wait(timeout=10)


def entries(store: Path) -> list[Path]:
    return [p for p in store.rglob("*") if p.is_file()]


def test_second_machine_hits_the_remote_with_an_empty_local_cache(server, tmp_path):
    url, store = server
    a = synth.write_l2(tmp_path / "a", kernels=3)
    assert len(build(a, cache_dir=tmp_path / "local-a", remote_cache=url).compiled) == 4
    assert len(entries(store / "cas")) >= 4 and len(entries(store / "ac")) >= 8
    b = synth.write_l2(tmp_path / "b", kernels=3)                # another machine: own path, own local cache
    result = build(b, cache_dir=tmp_path / "local-b", remote_cache=url)
    assert result.compiled == [] and len(result.from_cache) == 4
    assert {p.name: p.read_bytes() for p in a.rglob("*.so")} == {p.name: p.read_bytes() for p in b.rglob("*.so")}


def test_remote_only_without_a_local_cache(server, tmp_path):
    url, _store = server
    build(synth.write_l2(tmp_path / "a", kernels=2), remote_cache=url)
    result = build(synth.write_l2(tmp_path / "b", kernels=2), remote_cache=url)
    assert len(result.from_cache) == 3


def test_dead_remote_degrades_to_local_building_with_one_warning(tmp_path, capfd):
    url = f"http://127.0.0.1:{free_port()}"                     # nothing listens there
    root = synth.write_l2(tmp_path / "a", kernels=3)
    result = build(root, cache_dir=tmp_path / "local", remote_cache=url, jobs=2)
    assert len(result.compiled) == 4 and result.ok
    err = capfd.readouterr().err
    assert err.count("remote cache unreachable") == 1 and "building locally" in err
