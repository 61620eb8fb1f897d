"""`pypto-build watch` (and `doit pypto-watch`): the edit loop kept warm, each round's variant in the history
(`variants.history`) with its run times.

Door: `watch` (the loop), `Settings`, `Session`. The verb that starts them is in
`cli/watch.py`. Modules: `inputs` (what a round depends on, what changed), `rounds` (the
session: what stays warm, one round), `loop` (watchfiles).
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "watch": "loop",
    "Settings": "rounds",
    "Session": "rounds",
}
__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
