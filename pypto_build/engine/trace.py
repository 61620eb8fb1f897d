"""`--trace FILE`: a run's timeline (one span per task, per worker) as Chrome-trace JSON for Perfetto."""
from __future__ import annotations

import json
from pathlib import Path

from ..core import atomic


def write_trace(spans: list[tuple[str, int, float, float]], path: Path) -> None:
    """Chrome-trace JSON: one complete event per task run, one thread per worker lane."""
    lanes = sorted({lane for _n, lane, _s, _e in spans})
    events = [{"name": "thread_name", "ph": "M", "pid": 0, "tid": lane, "args": {"name": f"worker {lane}"}}
              for lane in lanes]
    for name, lane, start, end in sorted(spans, key=lambda s: s[2]):
        events.append({"name": name, "cat": name.split(":")[0], "ph": "X", "pid": 0, "tid": lane,
                       "ts": round(start * 1e6, 1), "dur": round(max(end - start, 0.0) * 1e6, 1)})
    atomic.write_text(Path(path), json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}, indent=1) + "\n")
