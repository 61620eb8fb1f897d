"""The `.pto -> ptoas -> splice` units of a build directory (planning only).

Per sub-build with a `ptoas/` directory, one `PtoUnit` per `ptoas/<unit>.pto`:
`ptoas:<unit>` regenerates the raw `ptoas/<unit>.cpp` when the `.pto` content
(or ptoas) changed; `splice:<unit>` re-splices the preprocessed raw body into
every `kernels/<core>/<func>.cpp` it defines when the raw output changed. A sub-build's
kernel compiles wait for its splices for ordering only (doit's `task_dep` makes nothing
stale): a kernel's own source content decides whether it compiles.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..core.atomic import fit_name
from ..errors import ToolchainError, say_fix
from ..core.confine import OUTPUT_FIX, SOURCE_FIX, confine
from ..builddir.layout import Layout
from ..builddir.markers import PTOAS_DIR
from ..builddir.state_dir import BACKUP, STATE_DIR
from .ptoas import PtoasLookup, find_ptoas, ptoas_identity
from ..core.settings import PTOAS_TIMEOUT, REBUILD_FROM_PTO, pto_rebuild, seconds


@dataclass(frozen=True)
class PtoOptions:
    """How the stage runs: `enabled` False says why in `disabled_by`."""

    enabled: bool = True
    disabled_by: str = ""
    ptoas: str | None = None        # --ptoas PATH
    timeout: float = 60.0
    allow_unapplied: bool = False   # --allow-unapplied-pto: a .pto edit ptoas cannot apply is not a failure


@dataclass(frozen=True)
class PtoUnit:
    """One `.pto` file and its raw ptoas output (picklable doit action argument)."""

    name: str               # unit label used in task names ("<sub>/<unit>" or "<unit>")
    sub_rel: str            # sub-build relative to the build root
    pto: str                # ptoas/<unit>.pto relative to the build root
    raw: str                # ptoas/<unit>.cpp relative to the build root
    record: str             # .pypto_build/splice/<label>.json: body digests as last spliced
    backup_dir: str         # .pypto_build/backup
    ptoas: str | None       # resolved ptoas executable, None when not found
    ptoas_key: str | None   # identity of ptoas + the fixed flags
    timeout: float
    allow_unapplied: bool = False
    missing: str = ""       # where ptoas was looked for, when it was not found


@dataclass(frozen=True)
class PtoPlan:
    """The `.pto` stage of one build directory: its units, where ptoas was found (if looked for) and the
    options it was planned with (`skipped_line`: why the stage does not run, when it does not)."""

    units: tuple[PtoUnit, ...]
    lookup: PtoasLookup | None
    options: PtoOptions

    @property
    def skipped_line(self) -> str | None:
        """The one line said when the stage cannot or may not run, else None."""
        if not self.options.enabled:
            return f"[pto->cpp] skipped ({self.options.disabled_by})"
        if self.units and self.lookup is not None and self.lookup.path is None:
            return f"[pto->cpp] skipped: {missing_text(self.lookup)}"
        return None


def missing_text(lookup: PtoasLookup) -> str:
    """Where ptoas was looked for, in one clause (`PTOAS_ROOT=/bad` names the paths it tried)."""
    if lookup.source == "PTOAS_ROOT":
        root = os.path.dirname(lookup.tried[0]) if lookup.tried else "?"
        return f"ptoas not found under PTOAS_ROOT={root} (looked for {', '.join(lookup.tried)})"
    if lookup.source == "--ptoas":
        return f"--ptoas {lookup.tried[0] if lookup.tried else '?'} is not an executable file"
    return f"ptoas not found on PATH (set PTOAS_ROOT or PATH, or pass {say_fix('--ptoas', 'ptoas=')})"


def pto_options(rebuild_from_pto: bool | None = None, ptoas: str | None = None,
                env: dict | None = None, allow_unapplied: bool = False) -> PtoOptions:
    """Options from the API/CLI flag and `PYPTO_REBUILD_FROM_PTO`, in PyPTO's words."""
    env = os.environ if env is None else env
    timeout = seconds(*PTOAS_TIMEOUT, env=env)
    by_env = pto_rebuild(env)                   # judged even when the flag decides: a bad value is one line
    if rebuild_from_pto is False:
        return PtoOptions(False, "rebuild_from_pto=False", ptoas, timeout, allow_unapplied)
    if not by_env:
        return PtoOptions(False, f"{REBUILD_FROM_PTO}=0", ptoas, timeout, allow_unapplied)
    return PtoOptions(True, "", ptoas, timeout, allow_unapplied)


def plan_pto(layout: Layout, options: PtoOptions, env: dict | None = None) -> PtoPlan:
    if not options.enabled:
        return PtoPlan((), None, options)
    found: list[tuple] = []
    for sub in layout.sub_builds:
        ptoas_dir = sub.path / PTOAS_DIR
        if ptoas_dir.is_dir():
            found += [(sub, p.stem) for p in sorted(ptoas_dir.glob("*.pto")) if p.is_file()]
    if not found:
        return PtoPlan((), None, options)
    lookup = find_ptoas(options.ptoas, env)
    if lookup.path is None and lookup.source == "--ptoas":
        raise ToolchainError(f"--ptoas {options.ptoas}: not an executable file; pass the path of ptoas, or leave "
                             "--ptoas out to use PTOAS_ROOT or PATH")
    key = ptoas_identity(lookup.path) if lookup.path else None
    units = []
    for sub, stem in found:
        prefix = "" if sub.rel == "." else f"{sub.rel}/"
        label = sub.label(stem)
        pto, raw = f"{prefix}{PTOAS_DIR}/{stem}.pto", f"{prefix}{PTOAS_DIR}/{stem}.cpp"
        for path, fix in ((pto, SOURCE_FIX), (raw, OUTPUT_FIX)):
            confine(layout.root, layout.root / path, f"ptoas unit {label}", fix)
        units.append(PtoUnit(label, sub.rel, pto, raw,
                             f"{STATE_DIR}/splice/{sub.label(fit_name(f'{stem}.json'))}", f"{STATE_DIR}/{BACKUP}",
                             lookup.path, key, options.timeout, options.allow_unapplied,
                             "" if lookup.path else missing_text(lookup)))
    return PtoPlan(tuple(units), lookup, options)
