"""One HTTP request under one deadline and a body cap: the remote cache's transport.

urllib's timeout bounds each socket operation, not the request, so a server that
trickles a byte every few seconds holds a caller forever; and http.client's own
exceptions (a cut body, a peer that does not speak HTTP) escape it. Here the
deadline covers connect, TLS handshake, send and the whole answer: every read
gets only the time left. Answers are parsed by http.client (status line,
headers, Content-Length or chunked bodies); every failure is one `HttpError`
whose text says what happened, for the caller's single warning.
"""
from __future__ import annotations

import functools
import http.client
import io
import socket
import ssl
import time

from ..errors import HttpError, one_line
from .remote_config import Endpoint

MAX_BODY = 256 * 2**20          # no cache entry of ours is near this; a bigger answer is not a cache's


def request(endpoint: Endpoint, method: str, path: str, body: bytes = b"", *, timeout_s: float,
            max_body: int = MAX_BODY) -> tuple[int, bytes]:
    """(status, body) of `method` `endpoint.base + path`, all within `timeout_s` seconds."""
    deadline = time.monotonic() + timeout_s
    sock: socket.socket | None = None
    try:
        sock = _connect(endpoint, deadline)
        head = (f"{method} {endpoint.base}{path} HTTP/1.1\r\nHost: {endpoint.netloc}\r\n"
                f"User-Agent: pypto_build\r\nConnection: close\r\n"
                + (f"Content-Length: {len(body)}\r\n" if method != "GET" else "") + "\r\n")
        _time_left(sock, deadline)
        sock.sendall(head.encode("ascii") + body)       # sendall's timeout bounds the whole send
        resp = http.client.HTTPResponse(_Source(sock, deadline), method=method)
        resp.begin()
        if resp.length is not None and resp.length > max_body:
            raise HttpError(f"an answer of {resp.length} bytes (more than {max_body})")
        data = resp.read() if resp.length is not None else resp.read(max_body + 1)
        if len(data) > max_body:
            raise HttpError(f"an answer of more than {max_body} bytes")
        return resp.status, data
    except HttpError:
        raise
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise HttpError(_describe(exc, timeout_s)) from None
    finally:
        if sock is not None:
            sock.close()


def _connect(endpoint: Endpoint, deadline: float) -> socket.socket:
    """A connected socket, trying each address of the host within what is left of the one deadline
    (socket.create_connection would give every address the whole timeout)."""
    error: OSError = OSError(f"{endpoint.host}: no address")
    addresses = socket.getaddrinfo(endpoint.host, endpoint.port, type=socket.SOCK_STREAM)
    for family, kind, proto, _, address in addresses:
        sock = socket.socket(family, kind, proto)
        try:
            _time_left(sock, deadline)
            sock.connect(address)
            break
        except OSError as exc:
            sock.close()
            error = exc
    else:
        raise error
    if endpoint.scheme != "https":
        return sock
    try:
        _time_left(sock, deadline)      # the handshake is bounded by the socket timeout as a whole
        return _tls_context().wrap_socket(sock, server_hostname=endpoint.host)
    except BaseException:
        sock.close()
        raise


@functools.lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    return ssl.create_default_context()          # the system's CAs (or $SSL_CERT_FILE), once per process


def _remaining(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _time_left(sock: socket.socket, deadline: float) -> None:
    sock.settimeout(_remaining(deadline))


class _Source:
    """What http.client.HTTPResponse reads from: the socket, each read limited to the time left."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline

    def makefile(self, mode: str) -> io.BufferedReader:
        return io.BufferedReader(_DeadlineReader(self.sock, self.deadline))


class _DeadlineReader(io.RawIOBase):
    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        _time_left(self.sock, self.deadline)
        return self.sock.recv_into(buffer)


def _describe(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"no complete answer within {timeout_s:g} s (raise PYPTO_BUILD_REMOTE_TIMEOUT if it is just slow)"
    if isinstance(exc, http.client.IncompleteRead):
        return f"the answer was cut short ({len(exc.partial)} bytes received, more announced)"
    if isinstance(exc, http.client.RemoteDisconnected):
        return "the server closed the connection without answering"
    if isinstance(exc, (http.client.BadStatusLine, http.client.LineTooLong)):
        return "the peer does not answer in HTTP"
    return one_line(str(exc) or type(exc).__name__, 200)
