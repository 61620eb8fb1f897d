"""A running `pypto-build watch` for tests: its output lines as they come, one round's block, Ctrl-C, and every
process it started (`family`)."""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

WAIT_S = 180.0          # a round on a loaded CI machine; the tests never depend on how fast it is


class Watcher:
    """A running watch process: its output lines as they come, waiting for one, stopping it with Ctrl-C."""

    def __init__(self, argv: list[str], cwd: Path, env: dict | None = None) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, env=env)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str) -> str:
        """The next line matching `pattern` (lines before it are kept in `lines`)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                line = self._queue.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise AssertionError(f"no line matching {pattern!r}; output so far:\n" + "\n".join(self.lines) +
                                     f"\nstderr:\n{self.proc.stderr.read() if self.proc.poll() is not None else ''}")
            self.lines.append(line)
            if re.search(pattern, line):
                return line

    def block(self, number: int) -> list[str]:
        """Round `number`'s block: its heading and the lines after it up to its `time` line."""
        self.wait_for(rf"^── round {number} ")
        start = len(self.lines) - 1
        self.wait_for(r"^   time ")
        return self.lines[start:]

    def interrupt(self, signum: int = signal.SIGINT, *, group: bool = True) -> tuple[int, str]:
        """Ctrl-C (the terminal signals the whole group), or `signum` to the watch alone (`kill PID`)."""
        if group:
            os.killpg(self.proc.pid, signum)
        else:
            os.kill(self.proc.pid, signum)
        rc = self.proc.wait(timeout=60)
        try:
            while (line := self._queue.get(timeout=60)) is not None:     # the rest of its output
                self.lines.append(line)
        except queue.Empty:             # a process it left behind holds its output open: `family` says which
            return rc, ""
        return rc, self.proc.stderr.read()

    def family(self) -> dict[int, str]:
        """Every live process the watch started, by `ps`: its process group (it leads one: the run server, the
        resource tracker) and their descendants (a program's run leads its own session); pid -> command."""
        return family(self.proc.pid)

    def stop(self, family: dict[int, str] | None = None) -> None:
        """SIGKILL its process group while it runs, and the processes of `family` still alive."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        table = processes()
        for pid, what in (family or {}).items():
            if pid in table and table[pid][2] == what:
                os.kill(pid, signal.SIGKILL)


def processes() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, process group, command) of every live process (zombies are dead)."""
    out = subprocess.run(["ps", "-e", "-ww", "-o", "pid=,ppid=,pgid=,stat=,args="], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        pid, ppid, pgid, stat, *args = line.split(None, 4)
        if not stat.startswith("Z"):
            found[int(pid)] = (int(ppid), int(pgid), " ".join(args))
    return found


def family(pgid: int) -> dict[int, str]:
    """The live processes of process group `pgid` and all their descendants: pid -> command."""
    table = processes()
    members = {pid for pid, (_, group, _) in table.items() if group == pgid}
    while True:
        more = {pid for pid, (ppid, _, _) in table.items() if ppid in members} - members
        if not more:
            return {pid: table[pid][2] for pid in members}
        members |= more


def wait_gone(pids: dict[int, str]) -> dict[int, str]:
    """Wait (WAIT_S at most) until none of `pids` lives; those still there (pid -> command)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        table = processes()
        left = {pid: what for pid, what in pids.items() if pid in table and table[pid][2] == what}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)
