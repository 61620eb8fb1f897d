"""Reading files the tool did not write itself, without ever blocking.

A build directory is data: any name in it may be a FIFO, a socket or a device
node instead of the file we expect. Opening a FIFO for reading blocks until a
writer appears (forever), and reading a device can block or never end. Every
read of such a file goes through `open_regular`: the type is checked on the
path's stat, then the file is opened with O_NONBLOCK (a FIFO opens at once)
and checked again on the open descriptor, so a swap between the two checks is
caught too; only a regular file is ever read. Symbolic links are followed: the
build directory's confinement rules (`confine.confine`) already resolve them.
"""
from __future__ import annotations

import errno
import fcntl
import os
import stat
from typing import BinaryIO

from ..errors import UserError

REPLACE = "replace it with the regular file it should be"
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class NotRegularFile(UserError, OSError):
    """A path we read is a FIFO, socket, device or directory (an OSError too); str() is the one-line message."""

    def __init__(self, path: str | os.PathLike, kind: str):
        super().__init__(errno.EINVAL, f"is {kind}, not a regular file", os.fspath(path))
        self.kind = kind

    def __reduce__(self):
        return type(self), (self.filename, self.kind)

    def __str__(self) -> str:
        return f"{self.filename}: {self.strerror}; {REPLACE}"          # as `refusal` says it


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO (named pipe)", ...)."""
    return next((name for test, name in _KINDS if test(mode)), "an unknown kind of file")


def refusal(path: str | os.PathLike, mode: int, fix: str = REPLACE) -> str:
    """The one line for a path that is not a regular file (`mode` from its stat): what it is and `fix`."""
    return f"{os.fspath(path)}: is {kind_of(mode)}, not a regular file; {fix}"


def unreachable(path: str | os.PathLike) -> str:
    """Why a path whose stat fails is not there, in words: "does not exist", "is a symbolic link loop", "is a
    symbolic link to '<target>', which does not exist", ... ("exists" when its stat succeeds)."""
    try:
        os.stat(path)
    except OSError as exc:
        link = os.path.islink(path)
        if exc.errno == errno.ELOOP:
            return "is a symbolic link loop (it leads back to itself)" if link else "goes through a symbolic link loop"
        if link and exc.errno == errno.ENOENT:
            return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
        if exc.errno == errno.ENOTDIR:
            return "does not exist (a folder on its path is a file)"
        return "does not exist" if exc.errno == errno.ENOENT else f"cannot be read ({exc.strerror})"
    return "exists"


def is_regular(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode)


def check_regular(path: str | os.PathLike, st: os.stat_result | None = None) -> os.stat_result:
    """The stat of `path` (symlinks followed); `NotRegularFile` unless it is a regular file."""
    st = os.stat(path) if st is None else st
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, kind_of(st.st_mode))
    return st


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """`open(path, "rb")` for a regular file only; never blocks (see the module docstring)."""
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        check_regular(path, os.fstat(fd))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike) -> bytes:
    """The bytes of a regular file (`NotRegularFile` for anything else; other OSErrors as `open`)."""
    with open_regular(path) as handle:
        return handle.read()


def read_text(path: str | os.PathLike, encoding: str = "utf-8", errors: str = "strict") -> str:
    """The text of a regular file, decoded (UnicodeDecodeError with `errors="strict"`)."""
    return read_bytes(path).decode(encoding, errors)
