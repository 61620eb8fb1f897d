"""The no-op fast path: "nothing to do" decided from stats alone, before doit loads.

After a full build that ended with every unit current, `record()` writes
`.pypto_build/noop.marshal` (noop_record.py: its format, and the console script's quick answer): a key
(package, platform, options, environment — with the variables the compiler reads, `compile_env` —, the
compiler as resolved with its `--version`, ptoas as resolved) and the stat signature of every file and
directory the decision read — sources, headers (system ones too), outputs, stamps, `.pto` units,
manifests, the sidecars the platform is chosen from, the compiler and ptoas binaries, the programs the
compiler's driver runs and the directories they were found by (`Compiler.watch`: another `as` earlier
on PATH changes one of them), the package's own files, the state folder's folders and its state
database. `check()` compares those stats and the key; any difference or a missing file sends the run
down the normal path, which re-decides by content. Before it answers, `refuse()` raises what the normal
path would refuse (settings, the state folder: by the same functions). A file that changed after the
run that records started (by ctime, `racy.changed_since`) is never recorded: its stat may not be what
the decision saw (the state folder's own paths excepted: only runs write them, each removing the record
first, so they are recorded as the run left them). Every run that goes through doit removes the record
first, so it never outlives the state it summarises. `plain()` adds what the quick
answer compares, when a plain `build DIR` would decide as this run did (on every platform that keeps
a record, with its watched checkouts).

The key is built from what the decision compares, looked up the same way:
`$CXX` resolved on PATH through every symbolic link and its `--version` text
(a retargeted `g++` link, a wrapper script or launcher running another
compiler) and ptoas found as `ptoas.find_ptoas` finds it. The binaries' content
is compared by stat (never hashed here).

A git checkout whose clean HEAD is part of an identity (`PTO_ISA_ROOT`,
simpler's tree and its PTO-ISA tree: `NoopKey.watched_checkouts`) is compared
by the stat of everything git's clean answer rests on (`git_watch`): every
tracked file, every directory git status walks, git's own files. The record
holds each list with those stats (`noop_record.trees_unchanged` compares them,
here and in the console script's quick answer); `.pypto_build/git_watch.json`
keeps the lists for the next record, which asks git again only when something
in the tree changed.

Not used when a run selects tasks, forces a rebuild (`--recompile`, an
`invalidate_binary_cache()` mark) or could not apply a `.pto` edit, nor on a
platform whose identities it cannot see (`Platform.facts.noop` None).
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..core import atomic, safeio, settings
from . import invalidation, noop_record
from ..core import stages
from ..errors import ToolchainError, UserError, warn
from ..builddir.markers import KERNEL_CONFIG, NEXT_LEVELS, ORCHESTRATION_DIR, PTOAS_DIR
from ..builddir import state_checks
from ..builddir.state_dir import STATE_DB, STATE_DIR, current_state_folder
from ..platforms import choice_inputs, toolchain_key_now
from ..pto import find_ptoas, identity_files, pto_options
from ..core.racy import changed_since
from ..core.hashing import bytes_digest
from ..toolchain.compiler import PACKAGE_DIR, probe_compiler
from ..toolchain.compile_env import env_part
from ..toolchain.git_watch import TreeWatch, signatures_of, watch_tree

if TYPE_CHECKING:
    from .graph import Graph

RECORD = noop_record.NAME
WATCHES = "git_watch.json"
ENV_KEYS = ("CXX", "CXXFLAGS", "PTO_ISA_ROOT", "PTOAS_ROOT", "PYPTO_REBUILD_FROM_PTO", "PATH",
            "HOME", "XDG_CONFIG_HOME")    # the last two: where git finds its global config
FIND = object()    # `key(ptoas_path=FIND)`: look ptoas up now


def key(platform: str, rebuild_from_pto: bool | None, ptoas: str | None, env: dict | None = None, *,
        toolchain: str | None = None, ptoas_path: str | None | object = FIND) -> str | None:
    """What the decision depends on besides files; None when the fast path must not be used.

    `toolchain` (`NoopKey.toolchain_key`) and `ptoas_path` are what planning found
    (when recording); left out, they are looked up now (when checking:
    `noop_keys.toolchain_key_now`, which runs the compilers' `--version`).
    """
    env = os.environ if env is None else env
    if toolchain is None:
        try:
            toolchain = toolchain_key_now(platform, env)
        except (ToolchainError, ValueError):
            return None                       # the full path says what is wrong
        if toolchain is None:
            return None
    if ptoas_path is FIND:
        ptoas_path = find_ptoas(ptoas, env).path
    git_env = sorted(f"{k}={v}" for k, v in env.items() if k.startswith("GIT_"))
    parts = [__version__, platform, repr(rebuild_from_pto), *(f"{k}={env.get(k, '')}" for k in ENV_KEYS),
             *git_env, *env_part(env), toolchain, str(ptoas_path)]
    return json.dumps(parts)


def tool_paths(compilers: list[str], ptoas_path: str | None) -> list[str]:
    """Files outside the build dir whose change must defeat the fast path: the binaries the key names
    (`compilers`: each compiler with what its driver's programs were found by, `Compiler.watch`; ptoas with
    the binary its launcher runs) and the package's own files."""
    paths = list(compilers)
    if ptoas_path:
        try:
            paths += identity_files(ptoas_path)
        except (OSError, ValueError):
            paths.append(ptoas_path)          # unreadable: its stat (or absence) is all we can compare
    paths += [str(p) for p in sorted(PACKAGE_DIR.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
              and "examples" not in p.parts]
    return paths


def check(root: Path, make_key: Callable[[], str | None], refusals: Callable[[], None] | None = None
          ) -> dict | None:
    """The recorded summary when nothing changed since the last full build, else None.

    `make_key` runs last (it starts the compiler's `--version`), only when every stat still matches.
    An `invalidate_binary_cache()` mark waiting for the next build is never a no-op. Before the summary
    is answered, `refusals` (the pipeline's: `refuse`) raises what the full path would refuse.
    """
    if invalidation.pending(root) is not None:
        return None
    data = noop_record.load(root)
    if data is None or not noop_record.unchanged(root, data):
        return None
    if not noop_record.trees_unchanged(data):
        return None
    try:
        run_key = make_key()
    except (OSError, ValueError):       # the full path says what is wrong
        return None
    if run_key is None or data.get("key") != run_key:
        return None
    if refusals is not None:
        refusals()
    return data


def refuse(root: Path, platform: str, request: Any) -> None:
    """Raise what a full `request` (`options.Request`) of `root` for `platform` refuses on its way to "nothing to
    do", in its order and by the same functions: the settings planning judges (`settings.check_planning`),
    the state folder leading out of the directory through a link (`state_checks.confine_state`), the cache's
    size (with a cache: `open_caches`), a lock file that is no regular file (`check_lock`: the lock), a state
    database or companion that is none (`check_state_files`: the take-over of the state of before,
    `open_state`). What the directory's files would make planning refuse needs no check here: the recording
    run planned them, and their stats still match."""
    from ..platforms import platform_names
    settings.check_planning(platform_names(), preludes=request.preludes)
    state_checks.confine_state(root)
    if request.cache_dir:
        settings.cache_size()
    state_checks.check_lock(Path(root) / STATE_DIR / state_checks.LOCK)
    state_checks.check_state_files(Path(root) / current_state_folder(root, platform) / STATE_DB)


def record(root: Path, run_key: str | None, paths: list[str], summary: dict, since_ns: int,
           checkouts: tuple[Path, ...] = (), own: Iterable[str] = ()) -> bool:
    """Write the record if every path exists and none changed since `since_ns` (the run's start), with the
    watch of each git checkout in `checkouts`; else remove it. `own`: paths of the state folder only runs
    write (under the directory lock, each removing the record first), compared as the others but recorded
    as this run left them."""
    root = Path(root)
    invalidate(root)
    if run_key is None:
        return False
    names, sigs, own = [], [], set(own)
    for path in dict.fromkeys([*paths, *own]):
        try:
            st = os.stat(path if os.path.isabs(path) else os.path.join(root, path))
        except OSError:
            return False
        if path not in own and changed_since(st, since_ns):
            return False
        names.append(path)
        sigs.append(noop_record.signature(st))
    trees = _watch_trees(root, checkouts, since_ns)     # after the stats: it may ask git
    if trees is None:
        return False
    try:
        if trees:
            _keep_watches(root, trees)
        watched = [(w.root, w.paths, w.optional, values) for w, _digest, values in trees]
        atomic.write_bytes(Path(noop_record.path(root)), noop_record.encode(
            {"key": run_key, "paths": tuple(names), "sigs": tuple(sigs), "trees": watched, **summary}), sweep=True)
    except OSError as exc:      # only a shortcut is lost: the build itself is complete
        from ..core.oserrors import describe
        warn(f"{describe(exc, doing='written')} (the build is complete; until then every build decides by "
             "content)")
        return False
    return True


def _changed_since(path: Path, since_ns: int) -> bool:
    """Whether `record` would refuse `path`: gone, or changed after `since_ns` (racy window included)."""
    try:
        return changed_since(os.stat(path), since_ns)
    except OSError:
        return True


def invalidate(root: Path) -> None:
    Path(noop_record.path(root)).unlink(missing_ok=True)


def record_graph(graph: Graph, tasks: list, plain_request: Callable[[], Any] | None = None,
                 sets: set[str] | None = None) -> bool:
    """After a full, clean build of `graph` (doit's `tasks`): let the next identical run skip doit (and, given
    `plain_request` — what a plain `build DIR` asks here, `options.request`, made — the console script too).
    `sets`: the header sets the tasks name (`header_sets.named`), when the caller has them already."""
    from ..compile import header_sets
    from ..core.stage_seam import NO_EFFECT
    if graph is None or graph.unknown_identities() or graph.platform.facts.noop is None:
        return False
    values = {t.name: t.values if isinstance(t.values, dict) else {} for t in tasks}
    sets = header_sets.named(values.values()) if sets is None else sets
    folder = current_state_folder(graph.layout.root, graph.platform.name)
    if any(v.get(NO_EFFECT) or v.get("forced") for v in values.values()):
        return False
    if any(_changed_since(graph.layout.root / p.stamp_path, graph.planned_ns) for p in graph.plans):
        return False            # a unit ran (its stamp was rewritten): `record` would refuse; skip gathering
    paths: list[str] = [".", *graph.layout.markers, *choice_inputs(graph.layout.root)]
    for extra in (ORCHESTRATION_DIR, NEXT_LEVELS):
        if (graph.layout.root / extra).is_dir():
            paths.append(extra)
    for p in graph.plans:
        sub = p.sub.rel
        paths += [sub, p.stamp_path, f"{sub}/{KERNEL_CONFIG}" if sub != "." else KERNEL_CONFIG]
        if (p.sub.path / PTOAS_DIR).is_dir():
            paths.append(PTOAS_DIR if sub == "." else f"{sub}/{PTOAS_DIR}")
        for u in p.units:
            paths += [u.source, u.output, *(values.get(u.task, {}).get("headers") or {})]
    outside = header_sets.files_of(sets, folder)   # headers outside the build directory, and their records
    if outside is None:
        return False                           # a record is gone: its units rebuild next run
    paths += outside
    state = state_dirs(graph.layout.root)       # with the database: what sqlite would say of it, unread here
    own = [*(state or ()), *([f"{folder}/{STATE_DB}"] if os.path.lexists(graph.layout.root / folder / STATE_DB)
                             else [])]
    for u in graph.pto.units:
        paths += [u.pto, u.raw, u.record]
    names = [t.name for t in tasks if t.actions and t.name.startswith(stages.BUILD)
             and not t.name.startswith(stages.prefix(stages.PRELUDE))]    # a prelude is a kernel's setup only
    lines = [graph.banner()] + ([graph.pto.skipped_line] if graph.pto.skipped_line else [])
    if graph.layout.unreferenced:
        return False            # keep saying it: the leftover line is printed by the full path only
    # The key and the tools as planning saw them: what changed since is caught by `since_ns`.
    pto = graph.pto.options
    ptoas_path = graph.pto.lookup.path if graph.pto.lookup else find_ptoas(pto.ptoas).path
    platform, noop = graph.platform, graph.platform.facts.noop
    run_key = key(platform.name, pto.enabled, pto.ptoas, toolchain=noop.toolchain_key, ptoas_path=ptoas_path)
    used = [platform.compiler_for(kind) for kind in ("kernel", "orchestration")]
    paths += tool_paths(list(dict.fromkeys(p for c in used for p in (c.path, *c.watch))), ptoas_path)
    current = sum(1 for n in names if n.startswith(stages.UNITS))
    quick = plain(graph, ptoas_path, state, plain_request) if state is not None and plain_request else None
    from .program import programs          # what the run stage needs of the plan: a no-op result carries it too
    runs = [list(p.encode(graph.layout.root)) for p in programs(graph)]
    return record(graph.layout.root, run_key, paths, {"tasks": names, "lines": lines, "current": current,
                                                      "quick": quick, "runs": runs}, graph.planned_ns,
                  noop.watched_checkouts, own)


def state_dirs(root: Path) -> list[str] | None:
    """Every folder below `root`'s state folder (relative to `root`), for the record to compare: an entry added,
    removed or replaced in one changes its stat signature. None when the state folder holds anything but
    folders and regular files (a link, a FIFO...): then only the full path answers, judging them."""
    found, todo = [], [STATE_DIR]
    while todo:
        rel = todo.pop()
        try:
            with os.scandir(Path(root) / rel) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(f"{rel}/{entry.name}")
                        found.append(todo[-1])
                    elif not entry.is_file(follow_symlinks=False):
                        return None
        except OSError:
            return None
    return sorted(found)


def _watch_trees(root: Path, checkouts: tuple[Path, ...], since_ns: int) -> list[tuple[TreeWatch, str, bytes]] | None:
    """Each checkout's watch with its state (digest) and signatures now; None when one cannot be watched or
    changed since `since_ns`.

    A watch kept by an earlier record is reused while its state is still the one kept with it (the tree,
    its index and its ignore rules are then as they were, so git would list the same); else git is asked.
    """
    kept = _kept_watches(root)
    found = []
    for top in map(os.fspath, checkouts):
        old = kept.get(top)
        values = signatures_of(old[0], since_ns) if old is not None else None
        if values is None or bytes_digest(values) != old[1]:
            watch = watch_tree(top)
            values = signatures_of(watch, since_ns) if watch is not None else None
            if values is None:
                return None
            old = (watch, bytes_digest(values))
        found.append((*old, values))
    return found


def _kept_watches(root: Path) -> dict[str, tuple[TreeWatch, str]]:
    """`git_watch.json`: checkout -> (watch, its state when kept); empty when missing or damaged."""
    try:
        data = json.loads(safeio.read_text(Path(root) / STATE_DIR / WATCHES))
        return {top: (TreeWatch(top, tuple(paths.split("\n")), tuple(optional)), digest)
                for top, paths, optional, digest in data["trees"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _keep_watches(root: Path, trees: list[tuple[TreeWatch, str, bytes]]) -> None:
    """Write `git_watch.json` with `trees` (and the other checkouts it kept), unless it holds them already."""
    kept = _kept_watches(root)
    if all(kept.get(w.root) == (w, digest) for w, digest, _values in trees):
        return
    kept.update({w.root: (w, digest) for w, digest, _values in trees})
    rows = [[w.root, "\n".join(w.paths), list(w.optional), digest] for w, digest in kept.values()]
    atomic.write_text(Path(root) / STATE_DIR / WATCHES, json.dumps({"trees": rows}), sweep=True)


def plain(graph: Graph, ptoas_path: str | None, state: list[str], plain_request: Callable[[], Any]
          ) -> dict | None:
    """What the console script's quick answer compares (noop_record.quick), when a plain `build DIR` under this
    environment decides as this run did: the same platform (and whether the recorded one can serve here, when
    the choice depends on it: `records.cannot_serve`), the same `.pto` settings, the platform's places and compilers as its key has them
    (`noop_keys`: each compiler one word, found on PATH), no launcher, no remote cache, no PTOAS_ROOT, and
    nothing a plain build refuses: its request as the command line makes it (`plain_request`), then `refuse`
    (every setting judged by the same functions; the quick answer compares the environment, so it judges
    the same). With the state folder's folders (`state`: the top ones, which the quick answer alone lists).
    Else None: the full path answers."""
    from ..platforms import cannot_serve, choose, key_module, toolchain_key
    env = os.environ
    platform, noop = graph.platform, graph.platform.facts.noop
    module = key_module(platform.name)
    if (module is None or noop is None or env.get(settings.LAUNCHER, "").strip() or env.get(settings.REMOTE_CACHE)
            or env.get("PTOAS_ROOT")):
        return None
    try:
        refuse(graph.layout.root, platform.name, plain_request())     # what `pypto-build build DIR` would refuse
        same_pto = pto_options() == graph.pto.options
        served, refused = (choose(graph.layout.root, None, cannot_serve=lambda _name, why=why: why)
                           for why in (None, "refused"))
        # whether the recorded platform can serve here decides the choice only when it would fall back
        unserved = None if served.name == refused.name else cannot_serve(served.name) is not None
        choice = refused if unserved else served
        if not same_pto or choice.name != platform.name:
            return None
        places = module.places(env)
        probes = [probe_compiler(spec, path=env.get("PATH")) for spec in module.compilers(env)]
    except (UserError, ToolchainError, OSError, ValueError, ImportError):
        return None
    if any(p.words or p.launcher for p in probes) or toolchain_key(places, [p.digest for p in probes]) != \
            noop.toolchain_key:
        return None             # what quick would look up is not what planning found
    return {"root": str(graph.layout.root), "package": str(PACKAGE_DIR), "user": noop_record.user(),
            "env": noop_record.environment(env), "platform": platform.name, "places": places,
            "compilers": [[p.named, p.exe, p.version] for p in probes], "ptoas": ptoas_path,
            "unserved": None if unserved is None else [served.name, unserved],
            "state_dirs": sorted({rel.split("/")[1] for rel in state})}
