"""What the L3 driver sends its rank workers, and how it gets there without hanging.

A dispatch's arguments are shared tensors. multiprocessing pickles what is put on
a queue in a feeder thread; a failure there is printed and the message dropped,
and the driver would wait for its answer forever. So messages are pickled at
dispatch (`pack`): a failure fails that dispatch, in one line. Sending a shared
tensor goes through a Unix socket under multiprocessing's temp folder in $TMPDIR;
`socket_dir_that_fits` keeps that path short enough to bind.
"""
from __future__ import annotations

import os
from multiprocessing.reduction import ForkingPickler

from .executor import ExecutorError

SUN_PATH_MAX = 107             # bytes of a Unix socket's path (108 with the NUL)
SOCKET_NAME_ROOM = len("/pymp-12345678/listener-12345678")     # what multiprocessing adds to $TMPDIR


def pack(msg: tuple, where: str) -> tuple[str, bytes]:
    """`msg` pickled now, for a rank worker's queue; ExecutorError naming `where` if it cannot be."""
    try:
        return ("msg", bytes(ForkingPickler.dumps(msg)))
    except Exception as exc:  # noqa: BLE001 - whatever pickling raises, this dispatch cannot be sent
        raise ExecutorError(f"{where}: cannot send the arguments to the rank's worker process: "
                            f"{type(exc).__name__}: {exc}") from None


def unpack(packed: tuple[str, bytes]) -> tuple:
    """The message `pack` made (in the worker)."""
    return ForkingPickler.loads(packed[1])


def socket_dir_that_fits() -> None:
    """Make multiprocessing's private temp folder one whose sockets fit in a socket address.

    A long $TMPDIR makes the bind fail ("AF_UNIX path too long"); like Python 3.13,
    fall back to a short system folder then. The folder is chosen once per process.
    """
    import multiprocessing.util as mp_util
    import tempfile

    if len(os.fsencode(tempfile.gettempdir())) + SOCKET_NAME_ROOM <= SUN_PATH_MAX:
        return
    short = next((d for d in ("/tmp", "/var/tmp", "/dev/shm") if os.access(d, os.W_OK | os.X_OK)), None)
    if short is None:
        return
    saved = tempfile.tempdir
    tempfile.tempdir = short
    try:
        mp_util.get_temp_dir()          # created now, under `short`, and kept for this process
    finally:
        tempfile.tempdir = saved
