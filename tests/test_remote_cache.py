"""The remote cache against real HTTP servers on loopback.

* nginx with WebDAV PUT, a real cache server (conftest's `nginx_cache`): nginx comes
  from Debian's packages (`.ci/run` installs nginx-light); without it those tests skip —
  they never pass without a real server.
* `remote_peer.py`, a test stand-in peer in its own process that misbehaves on
  purpose (cut bodies, not HTTP, trickling, stalling, HTTP 500, records for another
  key): every misbehaviour is a miss, one warning per run, a local build, a bounded
  number of requests (counted, never timed) and never another unit's binary.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pypto_build.testing import synth
from pypto_build.api import build
from conftest import binaries, needs_nginx
from pypto_build.testing.loopback import free_port
from remote_peer import PING, Peer


@pytest.fixture(autouse=True)
def _no_remote_from_env(monkeypatch):
    for var in ("PYPTO_BUILD_REMOTE_CACHE", "PYPTO_BUILD_REMOTE_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)


def entries(store: Path) -> list[Path]:
    return [p for p in store.rglob("*") if p.is_file()]


@pytest.mark.slow
@needs_nginx
def test_second_machine_hits_the_remote_with_an_empty_local_cache(nginx_cache, tmp_path):
    url, store = nginx_cache
    a = synth.write_l2(tmp_path / "a", kernels=3)
    assert len(build(a, cache_dir=tmp_path / "local-a", remote_cache=url).compiled) == 4
    assert len(entries(store / "cas")) >= 4 and len(entries(store / "ac")) >= 8
    b = synth.write_l2(tmp_path / "b", kernels=3)                # another machine: own path, own local cache
    result = build(b, cache_dir=tmp_path / "local-b", remote_cache=url)
    assert result.compiled == [] and len(result.from_cache) == 4
    assert {p.name: p.read_bytes() for p in a.rglob("*.so")} == {p.name: p.read_bytes() for p in b.rglob("*.so")}


@pytest.mark.slow
@needs_nginx
def test_remote_only_without_a_local_cache(nginx_cache, tmp_path):
    url, _store = nginx_cache
    build(synth.write_l2(tmp_path / "a", kernels=2), remote_cache=url)
    result = build(synth.write_l2(tmp_path / "b", kernels=2), remote_cache=url)
    assert len(result.from_cache) == 3


@pytest.mark.slow
def test_dead_remote_degrades_to_local_building_with_one_warning(tmp_path, capfd):
    url = f"http://127.0.0.1:{free_port()}"                     # nothing listens there
    root = synth.write_l2(tmp_path / "a", kernels=3)
    result = build(root, cache_dir=tmp_path / "local", remote_cache=url, jobs=2)
    assert len(result.compiled) == 4 and result.ok
    err = capfd.readouterr().err
    assert err.count("remote cache unreachable") == 1 and "building locally" in err


# --- a misbehaving peer: every failure is a miss, one warning per run, bounded requests ---------------

MODES = ("truncated", "garbage", "trickle", "stall", "500")
UNITS = 3                                   # write_l2(kernels=2): two kernels and the orchestration


@pytest.fixture
def peer_factory(tmp_path):
    started: list[Peer] = []

    def start(mode: str, **kwargs) -> Peer:
        peer = Peer(tmp_path / "peer", mode, **kwargs)
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.stop()


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The installed `pypto-build` with a 3 s request deadline (short for the trickle and stall tests, long
    enough for a loaded machine's healthy answers); a hang fails by the guard timeout."""
    return subprocess.run(["pypto-build", *args], capture_output=True, text=True, errors="replace", timeout=300,
                          env={**os.environ, "PYPTO_BUILD_REMOTE_TIMEOUT": "3", **(env or {})})


def one_remote_warning(proc: subprocess.CompletedProcess) -> str:
    """The run's only line about the remote (after checking there is exactly one and no traceback)."""
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "remote cache" in line]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pypto-build: warning: remote cache "), lines
    return lines[0]


def after_ping(peer: Peer) -> list[tuple[str, str]]:
    return [r for r in peer.requests() if r[1] != PING]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_a_broken_server_at_the_ping_is_one_warning_and_a_local_build(mode, peer_factory, tmp_path):
    peer = peer_factory(mode)
    root = synth.write_l2(tmp_path / "a", kernels=2)
    proc = cli("build", str(root), env={"PYPTO_BUILD_REMOTE_CACHE": peer.url})
    assert proc.returncode == 0, proc.stderr
    assert f"{UNITS} compiled" in proc.stdout and len(binaries(root)) == UNITS
    assert "remote cache unreachable" in one_remote_warning(proc)
    assert peer.requests() == [("GET", PING)]           # dropped at planning: no compile asks it


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("mode", MODES)
def test_a_server_failing_inside_the_compiles_is_one_warning_per_run(mode, jobs, peer_factory, tmp_path):
    peer = peer_factory(mode, ping_ok=True)             # the ping passes: the compile actions meet it
    root = synth.write_l2(tmp_path / "a", kernels=2)
    proc = cli("build", "-j", str(jobs), "--remote-cache", peer.url, str(root))
    assert proc.returncode == 0, proc.stderr
    assert f"{UNITS} compiled" in proc.stdout and len(binaries(root)) == UNITS
    assert "remote cache failed" in one_remote_warning(proc)
    # Disabled for the rest of the run, in every worker: only requests already in flight (one per
    # worker) reach the server; no unit after the first failure asks.
    assert 1 <= len(after_ping(peer)) <= jobs, peer.requests()
    assert peer.requests().count(("GET", PING)) == 1


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_ci_shares_one_verdict_across_directories_and_processes(mode, peer_factory, tmp_path):
    peer = peer_factory(mode, ping_ok=True)
    dirs = [synth.write_l2(tmp_path / name, kernels=2) for name in ("a", "b")]
    proc = cli("ci", "-j", "2", "--remote-cache", peer.url, *map(str, dirs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "pypto-build ci: 2 ok, 0 failed"
    assert all(len(binaries(d)) == UNITS for d in dirs)
    one_remote_warning(proc)
    assert peer.requests().count(("GET", PING)) == 1     # one ping for the whole run
    assert 1 <= len(after_ping(peer)) <= 2, peer.requests()


# --- records name their key; a record or body that does not match is a failure, never an install ------


@pytest.mark.slow
def test_a_working_peer_round_trip_has_no_warning(peer_factory, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("PYPTO_BUILD_REMOTE_TIMEOUT", "5")
    peer = peer_factory("cache")
    a = synth.write_l2(tmp_path / "a", kernels=3)
    assert len(build(a, remote_cache=peer.url, jobs=2).compiled) == 4       # misses (404) are not failures
    assert ("PUT", PING) not in peer.requests() and any(m == "PUT" for m, _ in peer.requests())
    records = [json.loads(p.read_bytes()) for p in (peer.store / "ac").iterdir()]
    assert records and all(set(r) == {"format", "key", "cas", "size"} for r in records)
    b = synth.write_l2(tmp_path / "b", kernels=3)
    result = build(b, remote_cache=peer.url, jobs=2)
    assert result.compiled == [] and len(result.from_cache) == 4 and binaries(a) == binaries(b)
    assert "remote cache" not in capfd.readouterr().err


@pytest.mark.slow
def test_a_record_for_another_key_never_installs_that_binary(peer_factory, tmp_path):
    store = tmp_path / "store"
    filler = peer_factory("cache", store=store)
    a = synth.write_l2(tmp_path / "a", kernels=3)
    build(a, remote_cache=filler.url)
    filler.stop()
    # Same store, but every /ac/ answer is the well-formed record of another key whose CAS entry exists.
    swap = peer_factory("swap", store=store)
    b = synth.write_l2(tmp_path / "b", kernels=3)                   # the same units: every key is stored
    proc = cli("build", "--remote-cache", swap.url, str(b))
    assert proc.returncode == 0, proc.stderr
    assert binaries(b) == binaries(a) and "4 compiled" in proc.stdout  # each unit's own binary, built here
    assert "another key" in one_remote_warning(proc)
    assert after_ping(swap)[0][1].startswith("/ac/") and len(after_ping(swap)) == 1   # no CAS body fetched


@pytest.mark.slow
def test_records_of_the_old_format_are_misses_and_get_replaced(peer_factory, tmp_path, capfd):
    peer = peer_factory("cache")
    build(synth.write_l2(tmp_path / "a", kernels=2), remote_cache=peer.url)
    for record in (peer.store / "ac").iterdir():                    # format 1: {"cas", "size"}, no key
        info = json.loads(record.read_bytes())
        record.write_text(json.dumps({"cas": info["cas"], "size": info["size"]}))
    b = build(synth.write_l2(tmp_path / "b", kernels=2), remote_cache=peer.url)
    assert len(b.compiled) == UNITS and b.from_cache == []
    assert "remote cache" not in capfd.readouterr().err             # a miss, not a failure
    assert all("key" in json.loads(r.read_bytes()) for r in (peer.store / "ac").iterdir())
    c = build(synth.write_l2(tmp_path / "c", kernels=2), remote_cache=peer.url)
    assert len(c.from_cache) == UNITS


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))


TAMPER = {
    "record-not-json": lambda rec, cas: rec.write_bytes(b"\x00not json{"),
    "record-not-an-object": lambda rec, cas: rec.write_text("[1, 2]"),
    "record-without-format": lambda rec, cas: rec.write_text(json.dumps({"key": "x", "digest": "y"})),
    "record-bad-size": lambda rec, cas: rec.write_text(json.dumps({**json.loads(rec.read_text()), "size": "9"})),
    "record-bad-cas": lambda rec, cas: rec.write_text(json.dumps({**json.loads(rec.read_text()), "cas": "../x"})),
    "cas-flipped": lambda rec, cas: _flip_last_byte(cas),
    "cas-longer": lambda rec, cas: cas.write_bytes(cas.read_bytes() + b"\x00"),
    "cas-shorter": lambda rec, cas: cas.write_bytes(cas.read_bytes()[:-1]),
}


@pytest.mark.parametrize("tamper", sorted(TAMPER))
def test_a_bad_entry_is_one_failure_that_installs_nothing(tamper, peer_factory, tmp_path, capfd):
    from pypto_build.cache.remote import RemoteCache, open_remote

    peer = peer_factory("cache")
    remote = open_remote(peer.url)
    cache = RemoteCache(remote)
    for key, body in (("key-1", b"\x7fELF one"), ("key-2", b"\x7fELF two")):
        (tmp_path / key).write_bytes(body)
        cache.put(key, tmp_path / key)
    dest = tmp_path / "out" / "k.so"
    assert cache.get("key-2", dest) and dest.read_bytes() == b"\x7fELF two"
    dest.unlink()
    (record,) = [p for p in (peer.store / "ac").iterdir() if json.loads(p.read_bytes())["key"] == "key-1"]
    TAMPER[tamper](record, peer.store / "cas" / json.loads(record.read_bytes())["cas"])
    asked = len(peer.requests())
    assert not cache.get("key-1", dest) and not dest.exists()
    assert remote.health.raised
    assert not cache.get("key-2", dest) and not dest.exists()       # disabled: not even asked
    cache.put("key-3", tmp_path / "key-1")
    assert len(peer.requests()) - asked <= 2                        # the record, and maybe its CAS body
    err = capfd.readouterr().err
    assert err.count("pypto-build: warning: remote cache failed") == 1 and len(err.splitlines()) == 1, err


def test_a_record_copied_from_another_key_is_refused(peer_factory, tmp_path, capfd):
    from pypto_build.cache.remote import RemoteCache, open_remote

    peer = peer_factory("cache")
    cache = RemoteCache(open_remote(peer.url))
    for key in ("key-1", "key-2"):
        (tmp_path / key).write_bytes(f"\x7fELF {key}".encode())
        cache.put(key, tmp_path / key)
    by_key = {json.loads(p.read_bytes())["key"]: p for p in (peer.store / "ac").iterdir()}
    by_key["key-1"].write_bytes(by_key["key-2"].read_bytes())       # key-1's path answers with key-2's record
    dest = tmp_path / "k.so"
    assert not cache.get("key-1", dest) and not dest.exists()
    assert "another key" in capfd.readouterr().err


def test_an_answer_bigger_than_the_cap_is_refused(peer_factory, tmp_path):
    from pypto_build.cache.remote_config import parse_url
    from pypto_build.cache.remote_http import HttpError, request

    peer = peer_factory("cache")
    endpoint = parse_url(peer.url)
    assert request(endpoint, "PUT", "/cas/" + "a" * 64, b"x" * 100, timeout_s=5)[0] == 201
    assert request(endpoint, "GET", "/cas/" + "a" * 64, timeout_s=5, max_body=100) == (200, b"x" * 100)
    with pytest.raises(HttpError, match="more than 99"):
        request(endpoint, "GET", "/cas/" + "a" * 64, timeout_s=5, max_body=99)


@pytest.mark.slow
def test_https_remote(peer_factory, tmp_path):
    """The transport's TLS path against a real TLS server (a self-signed certificate the client trusts)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60)
    peer = peer_factory("cache", tls=(cert, key))
    trust = {"SSL_CERT_FILE": str(cert)}
    a, b = synth.write_l2(tmp_path / "a", kernels=2), synth.write_l2(tmp_path / "b", kernels=2)
    first = cli("build", "--remote-cache", peer.url, str(a), env=trust)
    assert first.returncode == 0 and "remote cache" not in first.stderr, first.stderr
    second = cli("build", "--remote-cache", peer.url, str(b), env=trust)
    assert second.returncode == 0 and "0 compiled" in second.stdout, second.stdout + second.stderr
    untrusted = cli("build", "--remote-cache", peer.url, str(synth.write_l2(tmp_path / "c", kernels=2)))
    assert untrusted.returncode == 0 and "CERTIFICATE_VERIFY_FAILED" in one_remote_warning(untrusted)


# --- a malformed URL or timeout: one line, exit 2, nothing written -------------------------------------

BAD_URLS = ["ftp://cache.example/x", "http://", "localhost:8080", "http://cache:port/", "http://cache:99999/",
            "http://[::1", "http://user:secret@cache/", "http://cache/a b", "http://cache/?q=1"]


def tree(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def assert_refused(proc: subprocess.CompletedProcess, start: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"pypto-build: error: {start}"), proc.stderr
    assert "Traceback" not in proc.stderr and ";" in proc.stderr          # what is wrong; how to fix it


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_malformed_url_is_one_line_and_nothing_is_built(url, tmp_path):
    root = synth.write_l2(tmp_path / "a", kernels=2)
    before = tree(root)
    assert_refused(cli("build", "--remote-cache", url, str(root)), f"--remote-cache {url!r}: ")
    assert tree(root) == before


@pytest.mark.parametrize("url", BAD_URLS[:3])
def test_a_malformed_url_from_the_environment_or_for_ci(url, tmp_path):
    roots = [synth.write_l2(tmp_path / name, kernels=2) for name in ("a", "b")]
    before = [tree(r) for r in roots]
    assert_refused(cli("build", str(roots[0]), env={"PYPTO_BUILD_REMOTE_CACHE": url}),
                   f"PYPTO_BUILD_REMOTE_CACHE={url!r}: ")
    assert_refused(cli("ci", "-j", "2", "--remote-cache", url, *map(str, roots)), f"--remote-cache {url!r}: ")
    assert [tree(r) for r in roots] == before


def test_a_malformed_url_is_refused_even_when_nothing_is_to_do(l2):
    assert cli("build", str(l2)).stdout.endswith("0 compiled, 4 up to date\n")     # the no-op path
    before = tree(l2)
    assert_refused(cli("build", "--remote-cache", "http//cache", str(l2)), "--remote-cache 'http//cache': ")
    assert tree(l2) == before


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan"])
def test_a_bad_timeout_is_one_line(value, tmp_path):
    root = synth.write_l2(tmp_path / "a", kernels=2)
    proc = cli("build", "--remote-cache", f"http://127.0.0.1:{free_port()}", str(root),
               env={"PYPTO_BUILD_REMOTE_TIMEOUT": value})
    assert_refused(proc, f"PYPTO_BUILD_REMOTE_TIMEOUT={value!r}: ")
    assert not (root / ".pypto_build").exists()
