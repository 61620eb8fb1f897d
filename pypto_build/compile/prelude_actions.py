"""Precompiled preludes, run: building one into the store (`run_prelude`, `PreludeCheck`) and a kernel's
compile taking it (`take`, `Use`).

A prelude never changes a byte and never fails a build: a kernel compiled with one is the plain compile's
object, byte for byte, or the kernel compiles plainly and its values say why. What makes that so:
- the directives are read as the preprocessor reads them and stop at what differs in prelude.h
  (`prelude.directives`); a file beside the kernel answering a quoted include takes none (`quoted_beside`);
- the headers are found again by the compiler itself (`-M`, `probe`) whenever a kernel of the prelude is to
  compile: the entry is named by every header it found, at the path it found it (`entry_name`), so a header
  that now shadows another, a retargeted symbolic link or an edited header names another entry;
- an entry is built only when exact (`_build`): no header uses `__DATE__`, `__TIME__`, `__TIMESTAMP__`,
  `__BASE_FILE__` or `__INCLUDE_LEVEL__` (their values in the store's build are not the kernel's), and the
  directives are idempotent — read twice they define the same macros and yield no more tokens than once
  (the kernel reads them again after the precompiled state): otherwise it is recorded as refused, with why;
- a kernel adds only `-Winvalid-pch -include <entry>/prelude.h`, which no object records (`-fpch-deps` would,
  in `-g`'s producer string: the entry's headers are added to the kernel's dependencies instead), and only
  for an entry this run's check found exact and whose .gch still has its digest;
- `--recompile` builds each prelude it uses again.
A kernel compiles the plain way when a launcher runs it (distcc preprocesses here and sends the text), its
leading directives did not begin with exactly the prelude's when planned or no longer do, or the store has no
whole entry. GCC rejecting the header (`-Winvalid-pch`) or a compile that fails with it compiles the kernel
again, plainly; the run says so once.
"""
from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..cache import PreludeStore, entry_name
from ..core import atomic, procs
from ..core.confine import inside
from ..core.hashing import file_digest
from ..core.oserrors import one_line_failures
from ..core.stages import CHECK_SIGNATURE
from ..errors import one_line, warn
from ..toolchain.local_slots import local_work
from .depfile import DepfileError, as_named, read_depfile
from .prelude import begins_with, head_of, quoted_beside

if TYPE_CHECKING:
    from ..core.shared_flag import SharedFlag
    from ..toolchain.launcher import Launcher
    from .plan import CompileUnit
    from .prelude import PreludeUnit

PCH_FLAGS = ("-Winvalid-pch", "-include")           # then the entry's prelude.h
REJECTED = "[-Winvalid-pch]"                          # how GCC tags a precompiled header it would not use
_TARGET = "prelude"
# Header text whose value in the store's build of the prelude is not the kernel's compile's.
BUILD_SPECIFIC = ("__DATE__", "__TIME__", "__TIMESTAMP__", "__BASE_FILE__", "__INCLUDE_LEVEL__")
_BUILD_SPECIFIC_RE = re.compile(rb"\b(?:%s)\b" % b"|".join(w.encode() for w in BUILD_SPECIFIC))
# -g3 (-ggdb3, ...) records every macro definition with the file it came from: prelude.h's, in the store
_MACRO_DEBUG_RE = re.compile(r"-g(?:gdb|stabs\+?|xcoff\+?|vms)?3")


class _Unbuilt(Exception):
    """The prelude did not compile on its own, or its headers could not be listed (its kernels compile plainly)."""


class _Inexact(Exception):
    """The prelude would not give the plain compile's bytes (recorded in the store as refused: said once)."""


@one_line_failures
@local_work
def run_prelude(unit: PreludeUnit, store: str, fresh: bool = False):
    """Make sure the store names `unit`'s entry for the headers as the compiler finds them now (`fresh`: built
    again, `--recompile`). A prelude that cannot be built, or not exactly, is said and recorded without an
    entry: its kernels compile the plain way, the build goes on."""
    where = PreludeStore(store)
    try:
        headers = probe(unit, store)
        try:
            entry = where.make(unit.key, unit.text, headers, lambda header, pch: _build(unit, header, pch, headers),
                               fresh=fresh)
        except _Inexact as exc:
            where.refuse(unit.key, entry_name(unit.key, headers), str(exc))
            warn(f"{unit.task}: no precompiled prelude ({exc}); its kernels compile the plain way")
            return {"key": unit.key, "store": store, "entry": None, "why": str(exc)}
    except (OSError, _Unbuilt) as exc:
        warn(f"{unit.task}: the precompiled prelude could not be built ({one_line(exc, 300)}); its kernels "
             "compile the plain way")
        return {"key": unit.key, "store": store, "entry": None, "why": one_line(exc, 300)}
    return {"key": unit.key, "store": store, "entry": entry.name}


def probe(unit: PreludeUnit, store: str) -> dict[str, str]:
    """Every header the compiler reads for the prelude now (`-M`, from a prelude.h alone in a folder, as the
    entry is built): path as found -> digest. _Unbuilt when it cannot say."""
    with _scratch(store) as name:
        folder = Path(name)
        header, depfile = folder / "prelude.h", folder / "prelude.d"
        atomic.write_text(header, unit.text)
        _run(unit, "-M", "-MF", procs.path_arg(os.fspath(depfile)), "-MT", _TARGET, procs.path_arg(os.fspath(header)))
        return {h: file_digest(h) for h in _deps(unit, depfile, folder)}


def _build(unit: PreludeUnit, header: Path, pch: Path, headers: dict[str, str]) -> list[str]:
    """Compile `header` into `pch` with the kernels' argv, when exact (else _Inexact); the headers it read."""
    _exact(unit, header, headers)
    depfile = header.with_suffix(".d")
    _run(unit, "-o", procs.path_arg(os.fspath(pch)), "-MD", "-MF", procs.path_arg(os.fspath(depfile)), "-MT",
         _TARGET, procs.path_arg(os.fspath(header)))
    if not pch.is_file() or pch.stat().st_size == 0:
        raise _Unbuilt("the compiler wrote no precompiled header")
    return _deps(unit, depfile, header.parent)


def _exact(unit: PreludeUnit, header: Path, headers: dict[str, str]) -> None:
    """_Inexact unless the prelude gives the plain compile's bytes: no header names what has another value in
    the store's build (`BUILD_SPECIFIC`), the debug information records no macro (`-g3`: it would name
    prelude.h), and its directives read a second time (as the kernel reads them after the precompiled state)
    define the same macros and yield no more tokens."""
    macros = next((w for w in unit.argv if _MACRO_DEBUG_RE.fullmatch(w)), None)
    if macros:
        raise _Inexact(f"{macros} records each macro definition with the file it came from, the prelude's")
    for path in headers:
        with open(path, "rb") as handle:
            found = _BUILD_SPECIFIC_RE.search(handle.read())
        if found:
            raise _Inexact(f"{path} uses {found.group().decode()}, whose value would be the prelude's build's")
    with _scratch(os.fspath(header.parent.parent)) as twice_dir:
        twice = Path(twice_dir) / header.name
        atomic.write_text(twice, unit.text + unit.text)
        outputs = []
        for source in (header, twice):
            for mode in (("-dM",), ("-P",)):
                out = source.with_suffix(f".{mode[0][1:]}.i")
                _run(unit, "-E", *mode, "-o", procs.path_arg(os.fspath(out)), procs.path_arg(os.fspath(source)))
                data = out.read_bytes()
                # the macros in any order (GCC lists them as its table holds them); the tokens, however spaced
                outputs.append(sorted(data.splitlines()) if mode == ("-dM",) else data.split())
                out.unlink()
    if outputs[:2] != outputs[2:]:
        what = "macros" if outputs[0] != outputs[2] else "tokens"
        raise _Inexact(f"its directives read twice give other {what} than once (a header without an include "
                       "guard, or a directive that depends on one after it)")


def _run(unit: PreludeUnit, *words: str) -> procs.Completed:
    """The kernels' compiler with their argv, as a C++ header, and `words`; _Unbuilt when it fails."""
    proc = procs.run((*unit.argv, "-x", "c++-header", *words), cwd=unit.cwd, timeout=unit.timeout)
    if proc.timed_out or proc.returncode != 0:
        said = [ln for ln in proc.output.splitlines() if "error" in ln] or proc.output.splitlines() or [proc.how]
        raise _Unbuilt(f"{proc.how}: {said[0]}")
    return proc


def _deps(unit: PreludeUnit, depfile: Path, folder: Path) -> list[str]:
    """The headers a `-M`/`-MD` run listed, each as the compiler found it (absolute, `..` kept where a link
    makes it matter), without the scratch folder's own files."""
    try:
        deps = read_depfile(depfile, _TARGET)
    except DepfileError as exc:
        raise _Unbuilt(f"its dependency file cannot be read exactly ({exc})") from None
    finally:
        depfile.unlink(missing_ok=True)
    if deps is None:
        raise _Unbuilt("the compiler wrote no dependency file")
    scratch = os.path.realpath(folder)
    found = (as_named(os.path.join(unit.cwd, dep)) for dep in deps)
    return list(dict.fromkeys(p for p in found if not inside(os.path.realpath(p), scratch)))


def _scratch(store: str) -> tempfile.TemporaryDirectory:
    """A fresh temp folder in the store, removed after (a killed run's is swept with the store's others)."""
    os.makedirs(store, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".tmp-probe-", dir=store, ignore_cleanup_errors=True)


class PreludeCheck:
    """A prelude is up to date iff the store names, for its key, the entry of the headers the compiler finds
    now (whole), or records that those headers make no exact one; never under `--recompile` (`fresh`). Asked
    only when one of its kernels is to compile (a setup task): the probe costs one preprocessor run."""

    __signature__ = CHECK_SIGNATURE

    def __init__(self, unit: PreludeUnit, store: str, fresh: bool = False):
        self.unit, self.store, self.fresh = unit, store, fresh
        self.reason = ""

    def __call__(self, task, values) -> bool:
        self.reason = "--recompile builds it again" if self.fresh else self._stale()
        return not self.reason

    def _stale(self) -> str:
        try:
            name = entry_name(self.unit.key, probe(self.unit, self.store))
        except (OSError, _Unbuilt) as exc:
            return f"its headers cannot be listed ({one_line(exc, 200)})"
        where = PreludeStore(self.store)
        ref = where.ref(self.unit.key)
        if ref.get("entry") is None and ref.get("name") == name:
            return ""                                       # refused for these headers: said when it was
        if ref.get("entry") != name:
            return "never built for the headers as they are found now"
        return "" if where.entry(name, self.unit.key) is not None else "its entry left the store (or is damaged)"

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
    headers: tuple[str, ...] = ()       # the entry's headers (absolute): dependencies of the kernel too

    @property
    def how(self) -> str:
        """What the unit's values record (explain shows it)."""
        return f"with {self.task}" if self.flags else f"plainly: {self.why}"

    def plain(self, why: str) -> Use:
        return Use(why=why, task=self.task, store=self.store, key=self.key)


def take(unit: CompileUnit, prelude: PreludeUnit | None, store: str | None, launcher: Launcher | None,
         dropped: SharedFlag | None = None, began: bool = True, root: str | os.PathLike = ".") -> Use | None:
    """Whether `unit` compiles with `prelude` (None: the graph planned none for it). `began`: its kernel began
    with it when planned (so this run's check of the prelude ran before it). `dropped`: raised once a
    compile of this run found a precompiled header GCC rejects or fails with (the rest compile plainly: each
    try would cost a second compile). `root`: the build root (the compile action runs there; compdb does not)."""
    if prelude is None or not store:
        return None
    plain = Use(task=prelude.task, store=store, key=prelude.key).plain
    if dropped is not None and dropped.raised:
        return plain("a precompiled header failed earlier in this run (said then)")
    if launcher is not None:
        return plain(f"{launcher.name} runs the compile (it preprocesses here: a precompiled header would not "
                     "travel)")
    source = os.path.join(root, unit.source)
    if not began or not begins_with(head_of(source), prelude.directives):
        return plain(f"its leading directives do not begin with {prelude.task}'s")
    beside = quoted_beside(prelude.directives, source)
    if beside is not None:
        return plain(f'"{beside}" beside it answers the prelude\'s #include')
    entry, refused = PreludeStore(store).lookup(prelude.key)
    if entry is None:
        return plain(f"{prelude.task}: {refused}" if refused else
                     f"{prelude.task} is not in the store (or a header it read has changed since)")
    real_root = os.path.realpath(root)
    if any(inside(os.path.realpath(h), real_root) for h in entry.headers):
        return plain(f"{prelude.task} reads a header of the build directory")
    return Use((*PCH_FLAGS, entry.header), task=prelude.task, store=store, key=prelude.key, entry=entry.name,
               headers=tuple(entry.headers))


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


def with_prelude(use: Use | None, deps: list[str], sub: str) -> list[str]:
    """The kernel's dependencies: the depfile's names without the store's files (the entry's prelude.h), and the
    headers the entry was made from (without `-fpch-deps` the depfile lists only what the kernel's own text
    includes)."""
    if not use or not use.flags:
        return deps
    stores = (os.path.abspath(use.store), os.path.realpath(use.store))
    kept = [d for d in deps if not any(inside(os.path.abspath(os.path.join(sub, d)), s) for s in stores)]
    return list(dict.fromkeys([*kept, *use.headers]))
