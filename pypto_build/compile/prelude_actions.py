"""Precompiled preludes, run: building one into the store (`run_prelude`, `PreludeCheck`) and a kernel's
compile taking it (`take`, `Use`).

A prelude never changes a byte and never fails a build. Its unit builds the header with the kernels' own
argv plus `-x c++-header` (and `-MD`, to learn the headers it reads); a kernel takes it with
`-Winvalid-pch -include <entry>/prelude.h -fpch-deps` (so the kernel's depfile still lists every header).
A kernel compiles the plain way — and its values say why — when: a launcher runs it (distcc preprocesses
here and sends the text: the header would not travel), its leading directives no longer begin with exactly
the prelude's, a file beside it answers one of the prelude's `#include "..."`, the store has no whole entry
made from the headers as they are now, or a header of the entry is in the build directory. GCC rejecting
the header (`-Winvalid-pch`) or a compile that fails with it compiles the kernel again, plainly; the run
says so once.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..cache import PreludeStore
from ..core import procs
from ..core.confine import inside
from ..core.filestate import first_changed, make_state
from ..core.oserrors import one_line_failures
from ..core.stages import CHECK_SIGNATURE
from ..errors import one_line, warn
from ..toolchain.local_slots import local_work
from .depfile import DepfileError, read_depfile
from .prelude import begins_with, head_of, quoted_beside

if TYPE_CHECKING:
    from ..core.shared_flag import SharedFlag
    from ..toolchain.launcher import Launcher
    from .plan import CompileUnit
    from .prelude import PreludeUnit

PCH_FLAGS = ("-Winvalid-pch", "-include")           # then the entry's prelude.h, then -fpch-deps
REJECTED = "[-Winvalid-pch]"                          # how GCC tags a precompiled header it would not use
_TARGET = "prelude"


class _Unbuilt(Exception):
    """The prelude did not compile on its own (its kernels compile the plain way)."""


@one_line_failures
@local_work
def run_prelude(unit: PreludeUnit, store: str):
    """Make sure the store holds `unit`'s entry, built from the headers as they are now. Its values name the
    entry and hold the states of those headers (`PreludeCheck`); a prelude that cannot be built is said (once:
    the task runs once a run) and recorded without an entry: its kernels compile the plain way, the build goes
    on."""
    try:
        entry = PreludeStore(store).make(unit.key, unit.text, lambda header, pch: _build(unit, header, pch))
    except (OSError, _Unbuilt) as exc:
        warn(f"{unit.task}: the precompiled prelude could not be built ({one_line(exc, 300)}); its kernels "
             "compile the plain way")
        return {"key": unit.key, "store": store, "entry": None, "why": one_line(exc, 300)}
    return {"key": unit.key, "store": store, "entry": entry.name,
            "headers": {path: make_state(path) for path in entry.headers}}


def _build(unit: PreludeUnit, header: Path, pch: Path) -> list[str]:
    """Compile `header` into `pch` with the kernels' argv; the headers it read (resolved, the header too)."""
    depfile = header.with_suffix(".d")
    argv = (*unit.argv, "-x", "c++-header", procs.path_arg(os.fspath(header)), "-o", procs.path_arg(os.fspath(pch)),
            "-MD", "-MF", procs.path_arg(os.fspath(depfile)), "-MT", _TARGET)
    proc = procs.run(argv, cwd=unit.cwd, timeout=unit.timeout)
    if proc.timed_out or proc.returncode != 0:
        said = [ln for ln in proc.output.splitlines() if "error" in ln] or proc.output.splitlines() or [proc.how]
        raise _Unbuilt(f"{proc.how}: {said[0]}")
    if not pch.is_file() or pch.stat().st_size == 0:
        raise _Unbuilt("the compiler wrote no precompiled header")
    try:
        deps = read_depfile(depfile, _TARGET)
    except DepfileError as exc:
        raise _Unbuilt(f"its dependency file cannot be read exactly ({exc})") from None
    finally:
        depfile.unlink(missing_ok=True)
    if deps is None:
        raise _Unbuilt("the compiler wrote no dependency file")
    return list(dict.fromkeys(os.path.realpath(os.path.join(unit.cwd, d)) for d in deps))


class PreludeCheck:
    """A prelude is up to date iff its entry was made for its key in this store, is still there, and every
    header it read is unchanged."""

    __signature__ = CHECK_SIGNATURE

    def __init__(self, key: str, store: str):
        self.key, self.store = key, store
        self.reason = ""

    def __call__(self, task, values) -> bool:
        values = values or {}
        if values.get("key") != self.key or values.get("store") != self.store:
            self.reason = "never built" if "key" not in values else "another prelude or store"
        elif not values.get("entry"):
            self.reason = f"could not be built last time ({values.get('why', '')})"
        elif not PreludeStore(self.store).answers(self.key, values["entry"]):
            self.reason = "its entry left the store (or GCC rejected it)"
        else:
            self.reason = first_changed(values.get("headers") or {}) or ""
            self.reason = f"header {self.reason}" if self.reason else ""
        return not self.reason

    def __repr__(self) -> str:
        return self.reason or "prelude current"


@dataclass(frozen=True)
class Use:
    """How one kernel compiles: with the entry's header (`flags` to add), or plainly (`why`)."""

    flags: tuple[str, ...] = ()
    why: str = ""
    task: str = ""
    store: str = ""
    key: str = ""
    entry: str = ""

    @property
    def how(self) -> str:
        """What the unit's values record (explain shows it)."""
        return f"with {self.task}" if self.flags else f"plainly: {self.why}"

    def plain(self, why: str) -> Use:
        return Use(why=why, task=self.task, store=self.store, key=self.key)


def take(unit: CompileUnit, prelude: PreludeUnit | None, store: str | None, launcher: Launcher | None,
         dropped: SharedFlag | None = None) -> Use | None:
    """Whether `unit` compiles with `prelude` (None: the graph planned none for it). `dropped`: raised once a
    compile of this run found a precompiled header GCC rejects or fails with (the rest compile plainly: each
    try would cost a second compile)."""
    if prelude is None or not store:
        return None
    plain = Use(task=prelude.task, store=store, key=prelude.key).plain
    if dropped is not None and dropped.raised:
        return plain("a precompiled header failed earlier in this run (said then)")
    if launcher is not None:
        return plain(f"{launcher.name} runs the compile (it preprocesses here: a precompiled header would not "
                     "travel)")
    if not begins_with(head_of(unit.source), prelude.directives):
        return plain(f"its leading directives do not begin with {prelude.task}'s")
    beside = quoted_beside(prelude.directives, unit.source)
    if beside is not None:
        return plain(f'"{beside}" beside it answers the prelude\'s #include')
    entry = PreludeStore(store).current(prelude.key)
    if entry is None:
        return plain(f"{prelude.task} is not in the store (or a header it read has changed since)")
    root = os.path.realpath(".")                # actions run in the build root
    if any(inside(h, root) for h in entry.headers):
        return plain(f"{prelude.task} reads a header of the build directory")
    return Use((*PCH_FLAGS, entry.header, "-fpch-deps"), task=prelude.task, store=store, key=prelude.key,
               entry=entry.name)


def rejected(use: Use | None, output: str) -> bool:
    """Whether GCC would not use the entry's header (it compiled the text instead: slower, same bytes)."""
    return bool(use and use.flags) and REJECTED in output


def drop(use: Use, why: str, dropped: SharedFlag | None, *, forget: bool) -> Use:
    """The plain way after `why`: GCC rejected the header (`forget`: the store stops naming that entry, so the
    prelude is built again next run), or the compile failed with it and not without; said once a run, and the
    run's other kernels compile plainly."""
    if forget:
        PreludeStore(use.store).forget(use.key, use.entry)
    if dropped is None or dropped.raise_once():
        warn(f"{use.task}: {why}; kernels compile the plain way for the rest of this run (same bytes, slower)")
    return use.plain(why)


def from_store(use: Use | None, deps: list[str], sub: str) -> list[str]:
    """The depfile's names without the store's files (the entry's prelude.h, the header it was made from)."""
    if not use or not use.flags:
        return deps
    stores = (os.path.abspath(use.store), os.path.realpath(use.store))
    return [d for d in deps if not any(inside(os.path.abspath(os.path.join(sub, d)), s) for s in stores)]
