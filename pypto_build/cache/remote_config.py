"""The remote cache's settings from the command line and the environment, validated while planning.

`--remote-cache URL` (else `$PYPTO_BUILD_REMOTE_CACHE`) must be `http(s)://HOST[:PORT][/PATH]`;
`$PYPTO_BUILD_REMOTE_TIMEOUT` is the deadline of one request in seconds (connect, send and the
whole answer). A bad value is one line naming where it came from, what is wrong and the fix,
before anything is built. Light on purpose (urllib.parse is already loaded by pathlib): the
no-op path checks the settings too, so a typo is never silently ignored.
"""
from __future__ import annotations

import ipaddress
import math
import os
import re
from dataclasses import dataclass
from typing import Mapping
from urllib.parse import urlsplit

from ..errors import UserError
from ..core.settings import REMOTE_CACHE

ENV_URL = REMOTE_CACHE
ENV_TIMEOUT = "PYPTO_BUILD_REMOTE_TIMEOUT"
DEFAULT_TIMEOUT_S = 10.0
_FORM = "write it as http://HOST[:PORT][/PATH] (or https://...)"
_HOST_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")
_BAD_PATH_RE = re.compile(r"[\x00-\x20\x7f]")


@dataclass(frozen=True)
class Endpoint:
    """Where the remote cache answers: requests go to `base` + "/ac/..." or "/cas/..."."""

    url: str            # as given, without a trailing slash (for messages)
    scheme: str         # "http" | "https"
    host: str           # name or address (IPv6 without brackets)
    port: int
    netloc: str         # the Host header: host[:port] (an IPv6 host in brackets)
    base: str           # path prefix, "" or "/prefix"


@dataclass(frozen=True)
class RemoteSettings:
    """A remote cache as configured: where it is and the deadline of one request."""

    endpoint: Endpoint
    timeout_s: float    # deadline of one request


def remote_settings(url: str | None, env: Mapping[str, str] | None = None) -> RemoteSettings | None:
    """The remote cache of a run (`url`, else $PYPTO_BUILD_REMOTE_CACHE), or None when none is set.

    Raises UserError (one line) on a malformed URL or timeout.
    """
    env = os.environ if env is None else env
    source = "--remote-cache" if url else ENV_URL
    value = url or env.get(ENV_URL) or None
    if value is None:
        return None
    return RemoteSettings(parse_url(value, source), _timeout(env.get(ENV_TIMEOUT)))


def parse_url(value: str, source: str = "--remote-cache") -> Endpoint:
    """The endpoint of `value`; UserError naming `source` (the flag or variable) when malformed."""
    where = f"{source} {value!r}" if source.startswith("-") else f"{source}={value!r}"

    def bad(what: str, fix: str = _FORM) -> UserError:
        return UserError(f"{where}: {what}; {fix}")

    if _BAD_PATH_RE.search(value):
        raise bad("the URL contains a space or a control character", "percent-encode it (%20) or remove it")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise bad(f"not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise bad(f"the scheme must be http or https, not {parts.scheme!r}" if parts.scheme
                  else "no http:// or https:// scheme")
    if parts.username is not None or parts.password is not None:
        raise bad("credentials in the URL are not supported", "use a cache that needs no login, without user@")
    host = parts.hostname or ""
    if not host:
        raise bad("no host")
    if not _HOST_RE.fullmatch(host):
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise bad(f"{host!r} is not a host name or address") from None
    if parts.query or parts.fragment or value.rstrip().endswith(("?", "#")):
        raise bad("a query (?...) or fragment (#...) is not allowed")
    if port == 0:
        raise bad("port 0 is not a port", "use the port the cache server listens on")
    netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
    return Endpoint(value.rstrip("/"), parts.scheme, host, port or (443 if parts.scheme == "https" else 80),
                    netloc, parts.path.rstrip("/"))


def _timeout(text: str | None) -> float:
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise UserError(f"{ENV_TIMEOUT}={text!r}: not a positive number of seconds; set it to e.g. "
                        f"{DEFAULT_TIMEOUT_S:g} (the deadline of one remote cache request) or unset it")
    return seconds
