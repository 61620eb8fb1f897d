"""Our own stdout and stderr, when the reader closes them (`pypto-build build DIR | head -1`): the run goes on.

A closed pipe is no damaged file and no reason to stop a build halfway: `guard()` wraps `sys.stdout` and
`sys.stderr` so that a write or flush meeting EPIPE (`BrokenPipeError`) points that descriptor at
/dev/null (`os.dup2`: the programs started later, and the interpreter's last flush, write there too) and
says nothing. The run goes on quietly to its end and exits with its own status (docs/guide.md, "Output
to a pipe"). Only these two streams are guarded: an EPIPE from a compiler's pipes, a replayed
program's channel or a real file is still the error it is. Front ends only (the console script,
`exits.guarded`, the processes a run starts that print to the same streams); never a library caller's
streams. Imports only `os` and `sys`: the console script's quick answer loads it. Chosen over SIGPIPE's
default action (death, 141): that could land mid-commit of the state or between a unit's install and its
state, and the next build would redo work already done.
"""
from __future__ import annotations

import os
import sys


class _Guarded:
    """A text stream whose writes and flushes never fail for a reader that went away (every other
    attribute is the stream's own)."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)

    def _gone(self) -> None:
        """Point the descriptor at /dev/null, then flush what the stream still holds there."""
        self.reader_gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())
            finally:
                os.close(null)
        except (OSError, ValueError, AttributeError):     # no descriptor (a StringIO): nothing to point
            pass
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass


def guard() -> None:
    """Wrap `sys.stdout` and `sys.stderr` (once) so that a reader that closes them never stops the run."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _Guarded):
            setattr(sys, name, _Guarded(stream))

