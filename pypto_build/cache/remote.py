"""A remote artefact cache over the Bazel HTTP cache protocol (GET/PUT under /ac/ and /cas/).

Binaries go to `/cas/<sha256 of the bytes>`; our keys map to `/ac/<sha256 of
"pypto_build:" + key>` whose body is a small JSON record naming the key it
answers for, the CAS entry and its size (format `pypto_build-ac-2`). Servers
that validate AC bodies as Bazel ActionResults need that validation off, e.g.
bazel-remote's --disable_http_ac_validation; a WebDAV server such as nginx
stores them as they are.

**Nothing the server does fails a build or holds it up.** Every request has one
deadline (connect, send, whole answer: `remote_http`) and a body cap. A 404 is a
miss; a record of the older format (no key named) or of another version is a
miss. Anything else that is not a clean answer — refused, cut short, late,
garbled, HTTP 500, a record that names another key, a malformed record, a CAS
body whose digest or size differs from its record — is a *failure*: a miss (or a
skipped store), never an installed file, and the remote is disabled for the
rest of the run with one warning.

**One run, one verdict, across processes.** The run's leader — the process that
opens the caches (`open_caches`) or `pypto-build ci` for all its directories — calls
`open_remote` once: the URL is validated, a shared flag is created
(`shared_flag.SharedFlag`) and the server is pinged. The flag
travels inside the `Remote` that every compile action receives: doit's `-j`
workers inherit it across fork, and `ci -j N` hands it to its spawned processes
when they start (pool initializer; such a flag can only cross spawn at process
start). The first failure in any process sets it and prints the run's only
warning; every later request, in any process, sees it and never asks.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core import atomic
from ..errors import RemoteError, warn
from ..core.shared_flag import SharedFlag
from .remote_config import RemoteSettings, remote_settings
from .remote_http import MAX_BODY, HttpError, request

AC_FORMAT = "pypto_build-ac-2"
AC_MAX_BODY = 64 * 2**10                # a record is ~250 bytes
PING_PATH = "/ac/" + "0" * 64           # never written: a cache answers 404
_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Remote:
    """The remote cache of one run: its settings and the health flag its processes share."""

    settings: RemoteSettings
    health: SharedFlag

    @property
    def url(self) -> str:
        return self.settings.endpoint.url


def open_remote(found: RemoteSettings | str | None, *, for_spawn: bool = False) -> Remote | None:
    """The run's remote cache (`found`: its settings as the request parsed them, or a URL), pinged once; None
    if none or dead.

    A malformed URL or timeout raises a UserError (one line). A server that does not answer the ping like a
    cache is dropped with the run's one warning. `for_spawn`: the flag will be handed to spawned processes
    (`ci -j N`), so it is made in the spawn context.
    """
    if not isinstance(found, RemoteSettings):
        found = remote_settings(found)
    if found is None:
        return None
    remote = Remote(found, SharedFlag(for_spawn))
    try:
        RemoteCache(remote).ping()
    except RemoteError as exc:
        if remote.health.raise_once():
            warn(f"remote cache unreachable ({remote.url}: {exc}); building locally")
        return None
    return remote


class RemoteCache:
    """get/put by key (the ArtifactCache interface) on one run's remote; never raises."""

    def __init__(self, remote: Remote, warn: Callable[[str], None] = warn) -> None:
        self.remote = remote
        self.warn = warn

    def ping(self) -> None:
        """Return when the server answers with a cache's miss or hit; RemoteError saying why it does not."""
        self._request("GET", PING_PATH, max_body=AC_MAX_BODY)

    def get(self, key: str, dest: Path) -> bool:
        """Restore `key` onto `dest` atomically; False on a miss or any failure (nothing written then)."""
        if self.remote.health.raised:
            return False
        try:
            status, body = self._request("GET", f"/ac/{_ac(key)}", max_body=AC_MAX_BODY)
            found = _record(body, key) if status == 200 else None
            if found is None:
                return False                    # 404, or an older format's record: replaced by the next store
            cas, size = found
            status, data = self._request("GET", f"/cas/{cas}")
            if status == 404:
                return False                    # the CAS entry was evicted: a miss
            if len(data) != size or hashlib.sha256(data).hexdigest() != cas:
                raise RemoteError(f"/cas/{cas[:16]}... holds {len(data)} bytes that are not the {size} bytes "
                                  "its action-cache record names")
        except RemoteError as exc:
            self._fail(str(exc))
            return False
        try:
            atomic.write_bytes(Path(dest), data, mode=0o755 if str(dest).endswith(".so") else 0o644)
        except OSError:
            return False                        # a local problem: the compile that follows reports it
        return True

    def put(self, key: str, src: Path) -> None:
        """Store `src` under `key` (CAS body first, then the record); a failure skips the store."""
        if self.remote.health.raised:
            return
        try:
            data = Path(src).read_bytes()
        except OSError:
            return
        if len(data) > MAX_BODY:
            return
        cas = hashlib.sha256(data).hexdigest()
        record = {"format": AC_FORMAT, "key": key, "cas": cas, "size": len(data)}
        try:
            self._request("PUT", f"/cas/{cas}", data)
            self._request("PUT", f"/ac/{_ac(key)}", json.dumps(record, sort_keys=True).encode())
        except RemoteError as exc:
            self._fail(str(exc))

    def _request(self, method: str, path: str, body: bytes = b"", *, max_body: int = MAX_BODY) -> tuple[int, bytes]:
        """(status, body) of a clean answer: GET 200 or 404, PUT 2xx; anything else raises RemoteError."""
        if self.remote.health.raised:
            raise RemoteError("disabled after an earlier failure in this run")
        try:
            status, data = request(self.remote.settings.endpoint, method, path, body,
                                   timeout_s=self.remote.settings.timeout_s, max_body=max_body)
        except HttpError as exc:
            raise RemoteError(f"{method} {path[:20]}...: {exc}") from None
        if (status in (200, 404)) if method == "GET" else (200 <= status < 300):
            return status, data
        raise RemoteError(f"{method} {path[:20]}...: HTTP {status}")

    def _fail(self, why: str) -> None:
        if self.remote.health.raise_once():
            self.warn(f"remote cache failed ({self.remote.url}: {why}); not used for the rest of this run, "
                      "building locally")


def _ac(key: str) -> str:
    return hashlib.sha256(f"pypto_build:{key}".encode()).hexdigest()


def _record(body: bytes, key: str) -> tuple[str, int] | None:
    """(CAS digest, size) of an action-cache record for `key`; None for another format's record."""
    try:
        info = json.loads(body)
    except (ValueError, RecursionError):
        raise RemoteError("an action-cache record that is not JSON") from None
    if not isinstance(info, dict):
        raise RemoteError("an action-cache record that is not a JSON object")
    form = info.get("format")
    if form is None and "cas" in info and "key" not in info:
        return None                             # format 1 named no key: a miss
    if isinstance(form, str) and form.startswith("pypto_build-ac-") and form != AC_FORMAT:
        return None                             # another version's record: a miss
    if form != AC_FORMAT:
        raise RemoteError("a malformed action-cache record (no format)")
    if info.get("key") != key:
        raise RemoteError(f"the action-cache record for key {key[:16]}... answers for another key "
                          f"({str(info.get('key'))[:16]}...): not installed")
    cas, size = info.get("cas"), info.get("size")
    if not (isinstance(cas, str) and _SHA256.fullmatch(cas) and type(size) is int and 0 <= size <= MAX_BODY):
        raise RemoteError("a malformed action-cache record (cas or size)")
    return cas, size


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
            self.local.record_hit()
        return hit

    def record_miss(self) -> None:
        if self.local is not None:
            self.local.record_miss()

    def put(self, key: str, src: Path, *, index: bool = False) -> None:
        if self.local is not None:
            self.local.put(key, src, index=index)
        if self.remote is not None:
            self.remote.put(key, src)
