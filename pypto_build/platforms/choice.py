"""Which platform a run targets: the one the directory records, unless told otherwise (light: the no-op path asks).

PyPTO records the platform it compiled for in `compiled_meta.json` (or
`distributed_meta.json`); `--platform` and `$PYPTO_BUILD_PLATFORM` override it.
A recorded platform that cannot be served here falls back to the one its record
names (the simulators: the host runtime), saying why and what to do; an
explicitly requested one never falls back (asked for on purpose, refused with
one line when it cannot run). Which names exist, which platform serves a
recorded name and its fallback: `records`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ..builddir.markers import COMPILED_META, DISTRIBUTED_META, NEXT_LEVELS
from ..core.settings import PLATFORM as PLATFORM_VAR     # $PYPTO_BUILD_PLATFORM
from ..errors import say_fix
from .records import DEFAULT_PLATFORM, platform_names, serving


@dataclass(frozen=True)
class Choice:
    """The platform a run targets and why: `name` is built for; `recorded` is what the directory says
    (and `recorded_in` where), `source` who decided, `fallback` why the recorded one is not served."""

    name: str
    source: str                      # "--platform", "$PYPTO_BUILD_PLATFORM", a sidecar name, or "default"
    recorded: str | None = None
    recorded_in: str | None = None
    fallback: str | None = None

    def why(self) -> str:
        """The reason shown beside the platform in the run's first line."""
        if self.fallback:
            return f"not the recorded {self.recorded}: {self.fallback}"
        if self.source in (COMPILED_META, DISTRIBUTED_META):
            return f"recorded in {self.source}"
        if self.source == "default":
            return "no platform recorded in the directory"
        if self.recorded and self.recorded != self.name:
            return f"{self.source}; {self.recorded_in} records {self.recorded}"
        return self.source


def recorded_platform(root: Path) -> tuple[str | None, str | None]:
    """(platform, sidecar name) as the directory records it, or (None, None) when no sidecar records one.

    Every sidecar read here is validated (`sidecars.py`; distributed_config is left to the run that uses it):
    one that exists but is damaged (torn JSON, a field of the wrong type, a FIFO) raises MetaError naming it
    and the fix, so a damaged sidecar is never read as "no platform recorded" (a silent switch to host). A
    missing one records nothing. A multi-
    orchestration parent (neither sidecar at its root) records it in its sub-builds' compiled_meta.json.
    """
    from ..builddir.sidecars import load_compiled_meta, load_distributed_meta

    def load_l3(path: Path):               # its distributed_config is the runner's to judge (a caller may replace it)
        return load_distributed_meta(path, validate_config=False)

    root = Path(root)
    for path, load in ((root / COMPILED_META, load_compiled_meta), (root / DISTRIBUTED_META, load_l3)):
        if os.path.lexists(path):          # the directory's own sidecar decides (both: the layout refuses it)
            return _recorded(path, load)
    found: tuple[str | None, str | None] = (None, None)
    nested = root / NEXT_LEVELS
    for path in sorted(nested.glob(f"*/{COMPILED_META}")) if nested.is_dir() else ():
        platform, name = _recorded(path, load_compiled_meta)      # each validated; the first platform decides
        if found[0] is None:
            found = (platform, name)
    return found


def choice_inputs(root: Path) -> list[str]:
    """What `recorded_platform` reads besides the markers, relative to `root` (the no-op record watches them):
    without a sidecar at the root, each `next_levels/<name>/` and its compiled_meta.json."""
    if any(os.path.lexists(root / name) for name in (COMPILED_META, DISTRIBUTED_META)):
        return []
    nested = root / NEXT_LEVELS
    found = []
    for sub in sorted(nested.iterdir()) if nested.is_dir() else ():
        found.append(f"{NEXT_LEVELS}/{sub.name}")
        if os.path.lexists(sub / COMPILED_META):
            found.append(f"{NEXT_LEVELS}/{sub.name}/{COMPILED_META}")
    return found


def _recorded(path: Path, load) -> tuple[str | None, str | None]:
    """The platform `path` records (validated by `load`: a damaged file raises MetaError), or (None, None)."""
    try:
        platform = load(path).platform
    except FileNotFoundError:              # a dangling link: nothing there records a platform
        return None, None
    return (platform, path.name) if platform else (None, None)


def choose(root: Path, requested: str | None = None, env: Mapping[str, str] | None = None,
           cannot_serve: Callable[[str], str | None] | None = None) -> Choice:
    """The platform to build `root` for: `requested` (--platform), else $PYPTO_BUILD_PLATFORM, else the
    recorded one — falling back to its record's `fallback` when it cannot be served here (`cannot_serve(name)`
    says why, or None when it can: `records.cannot_serve`)."""
    env = os.environ if env is None else env
    recorded, where = recorded_platform(Path(root))
    if requested:
        return Choice(requested, "--platform", recorded, where)
    if env.get(PLATFORM_VAR):
        return Choice(env[PLATFORM_VAR], f"${PLATFORM_VAR}", recorded, where)
    if recorded is None:
        return Choice(DEFAULT_PLATFORM, "default")
    record = serving(recorded)
    if record is None:
        return Choice(DEFAULT_PLATFORM, where or "default", recorded, where,
                      fallback=f"not a platform PyPTO has ({', '.join(platform_names())}); "
                      + say_fix("pass --platform", "pass platform=") + " to choose one")
    why = cannot_serve(record.name) if cannot_serve and record.fallback else None
    if why:
        return Choice(record.fallback, where or "default", recorded, where, fallback=why)
    return Choice(record.name, where or "default", recorded, where)
