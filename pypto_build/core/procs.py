"""Starting external programs, bounded: compilers, `--version` probes, ptoas, git.

Any program we start may crash, hang, exit early or flood its output. `run` starts
it in its own session (a process group of its own, away from the terminal), reads
stdout and stderr with a cap (the head and the tail are kept, the middle is
counted), and SIGKILLs the whole group — the program and everything it started
(`cc1plus`, `as`, a forked helper) — when the timeout passes, when waiting is
interrupted by any exception (Ctrl-C, SIGTERM as KeyboardInterrupt, SystemExit;
also one that lands inside Popen, before the program is registered) and when the
program itself exits, then reaps it. A `-j` worker that leaves on the user's
signal without unwinding calls `kill_running()` first (workers.py).

`path_arg` is how a path becomes an argument of any tool: it can never be read
as an option (`-main.cpp`) or a response file (`@k0.cpp`). `die_with_parent` is how a
process we fork or start (a `-j` worker, a program's run, the warm run server) never
outlives the one that started it.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


HEAD_BYTES = 96 * 1024      # per stream: the first errors are the ones that matter ...
TAIL_BYTES = 32 * 1024      # ... and the last lines say how it ended
POLL_S = 0.05               # how often the program's exit is checked without a pidfd
DRAIN_S = 2.0               # after the program exited: how long its killed group may hold the pipes
REAP_S = 5.0                # bound on reaping a SIGKILLed program (one stuck in the kernel stays a zombie)
PR_SET_PDEATHSIG = 1        # <linux/prctl.h>; set only by die_with_parent
_CHUNK = 64 * 1024

_live: set[int] = set()     # process groups started and not yet killed


def path_arg(path: str | os.PathLike) -> str:
    """`path` as a tool argument that can only be a path: relative paths start with `.` (`./` added).

    Keeps relative paths relative (a copied directory gives the same argv) and leaves
    absolute paths alone; a name starting with `-` or `@` gets `./` in front.
    """
    path = os.fspath(path)
    return path if path.startswith(("/", ".")) else f"./{path}"


@dataclass(frozen=True)
class Completed:
    """What a bounded program did: `returncode` None when it was killed at the timeout."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def how(self) -> str:
        """How it ended, for a message: `exit status N`, `killed by SIGSEGV`, `timed out`."""
        return describe(self.returncode)

    @property
    def output(self) -> str:
        """What it said: stderr, else stdout (compilers and ptoas report on stderr)."""
        return (self.stderr or self.stdout).strip()


class _Capture:
    """One stream's bytes: the first `head` and the last `tail` kept, the rest counted."""

    def __init__(self, head: int, tail: int) -> None:
        self.head, self.tail = bytearray(), bytearray()
        self.head_max, self.tail_max = head, tail
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.head_max - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.tail_max
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    def text(self) -> str:
        gap = f"\n[... {self.dropped} bytes omitted ...]\n".encode() if self.dropped else b""
        return bytes(self.head + gap + self.tail).decode("utf-8", errors="replace")


def run(argv: Sequence[str | os.PathLike], *, timeout: float, cwd: str | os.PathLike | None = None,
        env: Mapping[str, str] | None = None, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> Completed:
    """Run `argv` (no shell, stdin /dev/null) bounded in time, output and lifetime (see the module).

    Raises OSError when it cannot start; re-raises whatever interrupted the wait,
    after the program's whole group was killed.
    """
    argv = tuple(os.fspath(a) for a in argv)
    deadline = time.monotonic() + timeout
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError:
        raise
    except BaseException:
        for pid in _session_children(argv) - _live:     # interrupted inside Popen: it may run, unregistered
            kill_group(pid)
        raise
    _live.add(proc.pid)
    out, err = _Capture(head, tail), _Capture(head, tail)
    try:
        finished = _pump(proc, {proc.stdout: out, proc.stderr: err}, deadline)
        if not finished:
            kill_group(proc.pid)
            _pump(proc, {proc.stdout: out, proc.stderr: err}, time.monotonic() + DRAIN_S)   # what it said
    finally:
        kill_group(proc.pid)           # before reaping: the unreaped leader keeps its group id ours
        _live.discard(proc.pid)
        for pipe in (proc.stdout, proc.stderr):
            pipe.close()
        try:
            proc.wait(REAP_S)
        except subprocess.TimeoutExpired:
            pass
    return Completed(argv, proc.returncode if finished else None, out.text(), err.text())


def describe(returncode: int | None) -> str:
    """How a program ended, for a message: `exit status N`, `killed by SIGSEGV`, `timed out` (None)."""
    if returncode is None:
        return "timed out"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


def start(argv: Sequence[str | os.PathLike], **popen: object) -> subprocess.Popen:
    """Start a program that talks to us while it runs (no capture) in its own session, registered like
    `run`'s: `stop` (or `kill_running`) kills its whole group. For a child we exchange messages with."""
    proc = subprocess.Popen([os.fspath(a) for a in argv], start_new_session=True, **popen)
    _live.add(proc.pid)
    return proc


def stop(proc: subprocess.Popen, grace: float = 0.0) -> None:
    """Let `proc` exit on its own for up to `grace` s, then SIGKILL its whole group and reap it."""
    if grace:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc.pid)               # before reaping: the unreaped leader keeps its group id ours
    _live.discard(proc.pid)
    try:
        proc.wait(REAP_S)
    except subprocess.TimeoutExpired:
        pass


def kill_running() -> None:
    """SIGKILL the group of every program `run` started in this process and has not reaped.

    For a process about to leave on a signal without unwinding (a `-j` worker). Covers
    a program whose start the signal interrupted before `run` registered it: every
    child of this process that leads a session of its own is one `run` started.
    """
    for pgid in {*_live, *_session_children()}:
        kill_group(pgid)


def _session_children(argv: tuple[str, ...] | None = None) -> set[int]:
    """Children of this process that lead their own session (read from /proc; empty without it).

    With `argv`: only those running it, or still a copy of this process (not yet exec'd).
    """
    me, found = os.getpid(), set()
    try:
        names = [n for n in os.listdir("/proc") if n.isdigit()]
        wanted = None if argv is None else {_cmdline("self"), "\0".join(argv).encode()}
    except OSError:
        return found
    for name in names:
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rpartition(b")")[2].split()     # state ppid pgrp session ...
            if len(fields) > 3 and int(fields[1]) == me and int(fields[3]) == int(name) \
                    and (wanted is None or _cmdline(name) in wanted):
                found.add(int(name))
        except (OSError, ValueError):
            continue
    return found


def _cmdline(pid: str) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as handle:
        return handle.read().rstrip(b"\0")


def die_with_parent(parent: int | None) -> None:
    """Be SIGKILLed when the parent dies (Linux's PR_SET_PDEATHSIG), and leave at once if `parent` (its pid,
    when known) is already gone: the signal comes only for a death after it was set.

    The kernel sends it when the *thread* that forked this process ends, so a process must be started from a
    thread that lives as long as it should.
    """
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):       # not Linux: nothing to set
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def kill_group(pgid: int) -> None:
    """SIGKILL process group `pgid` (gone already, or not ours: nothing to do)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _pump(proc: subprocess.Popen, captures: dict, deadline: float) -> bool:
    """Read the pipes until the program exited and they closed; False when `deadline` came first.

    Once the program exited, its group is killed (nothing it started outlives it) and
    the pipes get `DRAIN_S` more to close (a helper that left the group may hold them).
    """
    sel = selectors.DefaultSelector()
    pidfd = _pidfd(proc.pid)
    try:
        for pipe, capture in captures.items():
            if not pipe.closed:
                sel.register(pipe, selectors.EVENT_READ, capture)
        if pidfd is not None:
            sel.register(pidfd, selectors.EVENT_READ, None)
        exited = False
        while True:
            if not exited and _exited(proc.pid):
                exited = True
                kill_group(proc.pid)
                deadline = min(deadline, time.monotonic() + DRAIN_S)
                if pidfd is not None:
                    sel.unregister(pidfd)
            if exited and not sel.get_map():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return exited
            for key, _events in sel.select(left if exited or pidfd is not None else min(left, POLL_S)):
                if key.data is None:
                    continue                # the pidfd: the program exited (checked above)
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fileobj)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)


def alive(pid: int) -> bool:
    """Whether a process `pid` runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (Linux 5.3+), else None (polled)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited(pid: int) -> bool:
    """Whether the program exited, without reaping it (its id must stay ours until its group is killed)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True
