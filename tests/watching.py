"""A running `pypto-build watch` for tests: its output lines as they come, one round's block, Ctrl-C."""
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

    def interrupt(self) -> tuple[int, str]:
        os.killpg(self.proc.pid, signal.SIGINT)
        rc = self.proc.wait(timeout=60)
        while (line := self._queue.get(timeout=60)) is not None:     # the rest of its output
            self.lines.append(line)
        return rc, self.proc.stderr.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
