"""Which platform a run targets: the one the directory records, unless told otherwise (light: the no-op path asks).

PyPTO records the platform it compiled for in `compiled_meta.json` (or
`distributed_meta.json`); `--platform` and `$PYPTO_BUILD_PLATFORM` override it.
A recorded simulator platform that cannot be served here falls back to the
host runtime, saying why and what to do; an explicitly requested one never
falls back (asked for on purpose, refused with one line when it cannot run).
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ..markers import COMPILED_META, DISTRIBUTED_META
from .names import DEFAULT_PLATFORM, PLATFORMS

ENV_VAR = "PYPTO_BUILD_PLATFORM"
SIMPLER_MODULES = ("simpler", "simpler_setup", "_task_interface")   # what a simpler install provides


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
    """(platform, sidecar name) as the directory records it, or (None, None). A sidecar that cannot be read
    records nothing here: the run that reads it in full says what is wrong with it."""
    candidates = [root / COMPILED_META, root / DISTRIBUTED_META]
    nested = root / "next_levels"
    if nested.is_dir():          # a multi-orchestration parent: its sub-builds record it
        candidates += sorted(nested.glob(f"*/{COMPILED_META}"))
    for path in candidates:
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        name = meta.get("platform") if isinstance(meta, dict) else None
        if isinstance(name, str) and name:
            return name, path.name
    return None, None


def choose(root: Path, requested: str | None = None, env: Mapping[str, str] | None = None,
           cannot_serve: Callable[[str, str], str | None] | None = None) -> Choice:
    """The platform to build `root` for: `requested` (--platform), else $PYPTO_BUILD_PLATFORM, else the
    recorded one — falling back to host when a recorded simulator cannot be served here
    (`cannot_serve(name, sidecar)` says why, or None when it can)."""
    env = os.environ if env is None else env
    recorded, where = recorded_platform(Path(root))
    if requested:
        return Choice(requested, "--platform", recorded, where)
    if env.get(ENV_VAR):
        return Choice(env[ENV_VAR], f"${ENV_VAR}", recorded, where)
    if recorded is None:
        return Choice(DEFAULT_PLATFORM, "default")
    if recorded not in PLATFORMS:
        return Choice(DEFAULT_PLATFORM, where or "default", recorded, where,
                      fallback=f"not a platform PyPTO has ({', '.join(PLATFORMS)}); pass --platform to choose one")
    why = cannot_serve(recorded, where or "") if cannot_serve else None
    if why and recorded.endswith("sim"):
        return Choice(DEFAULT_PLATFORM, where or "default", recorded, where, fallback=why)
    return Choice(recorded, where or "default", recorded, where)


def simpler_missing() -> str | None:
    """Why simpler cannot serve here (a module it provides is not importable), or None. Imports nothing."""
    for name in SIMPLER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (f"PyPTO's runtime simpler is not installed for {sys.executable} (module {name} not "
                    "importable): install simpler into this Python (pip install --no-build-isolation "
                    "<simpler checkout>) or run pypto_build with the Python that has it")
    return None


def cannot_serve(name: str, recorded_in: str = COMPILED_META) -> str | None:
    """Why a platform recorded in `recorded_in` cannot be built and run here (what to do, in the same line), or
    None. Light (imports nothing of simpler): the no-op path asks it."""
    if name.endswith("sim") and simpler_missing():
        return (f"simpler (PyPTO's runtime) is not importable here — install it for {name}'s results, or pass "
                "--platform host to choose the host runtime on purpose")
    return None
