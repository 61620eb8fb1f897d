"""`pypto-build watch DIR`: a round now, then one round per change of anything the graph depends on.

Change notification comes from `watchfiles` (Rust `notify`: inotify here, FSEvents on
macOS), chosen over `watchdog` because it coalesces an editor's burst itself (`step`:
a batch ends after STEP_MS of quiet, `debounce` bounds it), filters in the watcher
and has a polling mode built in. Where inotify cannot be used (no inotify, the watch
limit reached, `--poll`, WATCHFILES_FORCE_POLLING) it polls instead, saying so once.
A batch starts a round only when an input's content moved (`inputs.Snapshot`), and
only once the files it names are still (`_settle`: watchfiles counts distinct paths,
so writes that keep hitting one file end a batch every step). A round whose inputs
move while it runs is run again (`Session.round`): the last verdict is for what is
on disk. SIGTERM ends a watch as Ctrl-C does.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from ..errors import FAILED, UserError, WatcherFailed, one_line
from ..core.hashing import stat_key
from .inputs import ignored
from .rounds import Session, Settings

STEP_MS = 20            # a batch ends after this much quiet (an editor's temp-write + rename is one batch)
DEBOUNCE_MS = 1600      # ... or after this long, however busy the directory is (and so does `_settle`)
TICK_MS = 500           # the watcher wakes this often with nothing to report (the first wake: it is live)


def watch(root: Path, settings: Settings, *, out: TextIO | None = None, poll: bool | None = None,
          stop: threading.Event | None = None, rounds: int | None = None, graph=None) -> int:
    """Watch the build directory at `root` until Ctrl-C (`stop` set, or `rounds` rounds: for tests); the last
    round's status (`Round.status`). `graph`: its plan already made (the verb's, which checked it can run)."""
    from ..engine import sigterm_as_interrupt

    with sigterm_as_interrupt():        # SIGTERM as Ctrl-C: the run stopped, the summary said, state kept
        return _watch(root, settings, out if out is not None else sys.stdout, poll, stop, rounds,  # sys.stdout now
                      graph)


def _watch(root: Path, settings: Settings, out: TextIO, poll: bool | None, stop: threading.Event | None,
           rounds: int | None, graph=None) -> int:
    import watchfiles

    session = Session(root, settings, out, graph)
    session.starter.start_server()     # from this thread: the server dies with it
    warm = threading.Thread(target=session.starter.warm_up, daemon=True, name="pypto-build-warm-up")
    warm.start()                        # torch imports in the server while the first round compiles
    try:
        session.round([])
        while rounds is None or len(session.rounds) < rounds:
            dirs = session.inputs.watch_paths(bool(poll))
            try:
                finished = _rounds(session, watchfiles, dirs, poll, stop, rounds)
            except WatcherFailed as failed:
                exc = failed.__cause__
                if poll:
                    raise UserError(f"{root}: cannot watch for changes ({one_line(exc)}); "
                                    "run `pypto-build replay --validate DIR` after each edit instead") from None
                session.say(f"[watch] file notification unavailable ({one_line(exc)}); polling instead")
                poll = True
                continue
            if finished:
                break
    except KeyboardInterrupt:
        session.say(f"[watch] stopped after {len(session.rounds)} round(s); history in "
                     f"{session.history.path}")
        raise
    finally:
        session.close()
    return session.rounds[-1].status if session.rounds else FAILED     # the last round's, as replay gives it


def _rounds(session: Session, watchfiles, dirs: list[str], poll: bool | None, stop, rounds: int | None) -> bool:
    """Run rounds for the batches of one watcher; True when the watch is over, False to watch new folders."""
    root = session.root
    base = watchfiles.DefaultFilter()

    def wanted(change, path: str) -> bool:      # an input always (a checkout's .git/HEAD too), else no noise
        return path in session.inputs.roles or (base(change, path) and not ignored(root, path))

    watcher = watchfiles.watch(*dirs, watch_filter=wanted, step=STEP_MS, debounce=DEBOUNCE_MS, stop_event=stop,
                               force_polling=poll, rust_timeout=TICK_MS, yield_on_timeout=True, recursive=False,
                               raise_interrupt=True)
    started = False
    while True:
        try:
            batch = next(watcher)
        except StopIteration:
            return True                 # `stop` was set
        except (OSError, RuntimeError) as exc:      # the watcher itself (no inotify, its limit): not a round's
            raise WatcherFailed() from exc
        if not started:             # the watcher is live: what changed before it (while the last round ran)
            started = True
            changed = session.snapshot.changed(session.inputs.roles)
            if not changed and session.pending is None:
                session.say(f"[watch] watching {len(session.inputs.roles)} files ({len(dirs)} path(s)"
                             f"{', polling' if poll else ''}); Ctrl-C ends")
        elif not batch and poll:    # a poller sees mtimes to the second: our stat check (to the ns) each tick
            changed = session.snapshot.changed(session.inputs.roles)
        else:
            changed = changes(session, [path for _, path in batch])
        if not changed and session.pending is None:
            continue
        if changed:
            _settle([path for path, _ in changed] + [path for _, path in batch])
            changed = changes(session, [path for path, _ in changed] + [path for _, path in batch])
            if not changed and session.pending is None:     # written back as it was
                continue
        session.round(changed)
        if rounds is not None and len(session.rounds) >= rounds:
            return True
        if session.inputs.watch_paths(bool(poll)) != dirs:
            return False


def _settle(paths: list[str]) -> None:
    """Wait until `paths` stay as they are (by stat) for STEP_MS, DEBOUNCE_MS at most: the end of a burst of
    writes, which watchfiles alone cuts at every step when they keep hitting the same files."""
    deadline = time.monotonic() + DEBOUNCE_MS / 1000
    seen = _stats(paths)
    while time.monotonic() < deadline:
        time.sleep(STEP_MS / 1000)
        now = _stats(paths)
        if now == seen:
            return
        seen = now


def _stats(paths: list[str]) -> list[tuple | None]:
    found: list[tuple | None] = []
    for path in sorted(set(paths)):
        try:
            found.append(stat_key(path, os.stat(path)))
        except OSError:
            found.append(None)
    return found


def changes(session: Session, paths: list[str]) -> list[tuple[str, str]]:
    """The inputs among `paths` whose content moved, and files that appeared or went where they matter."""
    found = session.snapshot.changed(paths)
    for path in sorted(set(paths) - set(session.snapshot.states)):
        if session.inputs.starts_round(path):
            found.append((path, "added" if os.path.exists(path) else "removed"))
    return found
