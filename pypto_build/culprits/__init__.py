"""`pypto-build bisect`: which units make two variants of a program differ, and the first task where they part.

Door: `bisect` (the whole search, `hunt.bisect`: one `Report` per program), `Report` / `Culprit` (what it found),
`METHODS`. Modules: `hunt` (the driver), `sides` (the two variants compared), `scratch` (the copy it works in),
`runs` (one run of a mix, judged by the oracle), `search` (delta debugging over the suspects), `rebuild` (an
evicted good binary built again), `dump` and `trace` (arguments dumps read and compared task by task), `traced`
(the trace step of a bisect), `report` (the answer in words and JSON).
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "bisect": "hunt",
    "METHODS": "hunt",
    "Report": "report",
    "Culprit": "report",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
