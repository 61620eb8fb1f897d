"""The warm run server's first import: the server dies with the process that started it.

multiprocessing's forkserver runs none of our code but the imports of its preload list,
so importing this module is the hook (`WarmLauncher` lists it first). It acts only in a
server `WarmLauncher.start_server` started, which names its own pid in `PARENT` for it:
the server sets PR_SET_PDEATHSIG, so a `kill -9` of the watch kills it too, and with it
every run forked from it (each has PR_SET_PDEATHSIG on the server). Without this the
server would wait for every holder of its "alive" pipe to close it — a run stuck in a
kernel holds it, and the run dies only with the server: both would live on, the run
burning a core. Imported anywhere else (no `PARENT`), it does nothing.
"""
from __future__ import annotations

import os

from .. import procs

PARENT = "PYPTO_BUILD_WARM_PARENT"      # the starting process's pid, in the server's environment only


def _guard() -> int | None:
    """In a server started by `start_server`: die with the starter (gone already: leave); this server's pid."""
    parent = os.environ.pop(PARENT, None)       # popped: the runs forked from the server do not see it
    if parent is None or not parent.isdigit():
        return None
    procs.die_with_parent(int(parent))
    return os.getpid()


SERVER: int | None = _guard()       # the server's pid (None: not a server of ours): what its runs die with
