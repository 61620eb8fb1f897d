"""`pypto-build watch` (and `doit pypto-watch`): the edit loop kept warm; `pypto-build history`: the variants tried.

Door: `watch` (the loop), `Settings`, `Session`, `History`. The verbs that start them are
`cli/watch.py`. Modules: `inputs` (what a round depends on, what changed), `rounds` (the
session: what stays warm, one round), `loop` (watchfiles), `history` (variants per content of
the binaries).
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "watch": "loop",
    "Settings": "rounds",
    "Session": "rounds",
    "History": "history",
}
__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
