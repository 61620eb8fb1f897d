"""A remote artefact cache over the Bazel HTTP cache protocol (GET/PUT under /ac/ and /cas/).

Binaries go to `/cas/<sha256 of the bytes>`; our keys map to `/ac/<sha256 of
"pypto_build:" + key>` whose body is a small JSON record naming the CAS entry
(servers that validate AC bodies as Bazel ActionResults need that validation
off, e.g. bazel-remote's --disable_http_ac_validation; a WebDAV server such as
nginx stores them as they are). Every failure — refused, slow, broken — is a
miss or a skipped store, never a failed build: the caller warns once and goes
on building locally. Standard library only (urllib).
"""
from __future__ import annotations

import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable

from . import atomic

DEFAULT_TIMEOUT = 5.0


class RemoteError(Exception):
    """The remote cache did not answer as a cache should."""


class RemoteCache:
    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT, warn: Callable[[str], None] | None = None):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.warn = warn
        self.dead = False

    def ping(self) -> str | None:
        """None when the server answers with a cache's miss or hit, else why it does not."""
        try:
            self._request("GET", "/ac/" + "0" * 64)     # a miss (404) is the expected answer
            return None
        except RemoteError as exc:
            return str(exc)

    def get(self, key: str, dest: Path) -> bool:
        """Restore `key` onto `dest` atomically; False on a miss or any failure."""
        if self.dead:
            return False
        try:
            record = self._request("GET", f"/ac/{_ac(key)}")
            if record is None:
                return False
            info = json.loads(record)
            data = self._request("GET", f"/cas/{info['cas']}")
            if data is None or hashlib.sha256(data).hexdigest() != info["cas"]:
                return False
            atomic.write_bytes(Path(dest), data, mode=0o755 if str(dest).endswith(".so") else 0o644)
            return True
        except (RemoteError, ValueError, KeyError, TypeError) as exc:
            self._fail(exc)
            return False

    def put(self, key: str, src: Path) -> None:
        if self.dead:
            return
        try:
            data = Path(src).read_bytes()
            cas = hashlib.sha256(data).hexdigest()
            self._request("PUT", f"/cas/{cas}", data)
            self._request("PUT", f"/ac/{_ac(key)}", json.dumps({"cas": cas, "size": len(data)}).encode())
        except (RemoteError, OSError) as exc:
            self._fail(exc)

    def _request(self, method: str, path: str, body: bytes | None = None) -> bytes | None:
        req = urllib.request.Request(self.url + path, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.read() if method == "GET" else b""
        except urllib.error.HTTPError as exc:
            if method == "GET" and exc.code == 404:
                return None
            raise RemoteError(f"{method} {self.url}{path}: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RemoteError(f"{self.url}: {getattr(exc, 'reason', exc)}") from None

    def _fail(self, exc: Exception) -> None:
        self.dead = True                       # one failure: stop asking for the rest of this process
        if self.warn:
            self.warn(f"remote cache {self.url} failed ({exc}); building locally")


def _ac(key: str) -> str:
    return hashlib.sha256(f"pypto_build:{key}".encode()).hexdigest()


class TieredCache:
    """Local first, then remote; stores go to both. Same get/put interface as ArtifactCache."""

    def __init__(self, local, remote: RemoteCache | None):
        self.local, self.remote = local, remote

    def get(self, key: str, dest: Path, *, count: bool = True) -> bool:
        if self.local is not None and self.local.get(key, dest, count=False):
            return self._counted(count, hit=True)
        if self.remote is not None and self.remote.get(key, dest):
            if self.local is not None:
                self.local.put(key, dest, index=not count)
            return self._counted(count, hit=True)
        return False

    def _counted(self, count: bool, hit: bool) -> bool:
        if count and self.local is not None:
            self.local._count(hits=1)
        return hit

    def record_miss(self) -> None:
        if self.local is not None:
            self.local.record_miss()

    def put(self, key: str, src: Path, *, index: bool = False) -> None:
        if self.local is not None:
            self.local.put(key, src, index=index)
        if self.remote is not None:
            self.remote.put(key, src)


def remote_from_env(url: str | None, env=None) -> str | None:
    env = os.environ if env is None else env
    return url or env.get("PYPTO_BUILD_REMOTE_CACHE") or None


def reachable(url: str | None) -> str | None:
    """`url` (else $PYPTO_BUILD_REMOTE_CACHE) if the server answers; else None, after one warning."""
    import sys

    url = remote_from_env(url)
    if url:
        why = RemoteCache(url, timeout=2.0).ping()
        if why:
            print(f"pypto-build: warning: remote cache unreachable ({why}); building locally", file=sys.stderr)
            return None
    return url
