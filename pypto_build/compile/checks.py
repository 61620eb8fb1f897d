"""The compile stage's checks (doit `uptodate` objects): what doit's file_dep does not cover, with reasons.

doit tracks neither command lines, nor identities, nor the headers a compiler
read, nor whether a target was modified; `UnitCheck` does. Each returns
True/False (never None: doit would ignore it, which fails open) and keeps the
reason, which its repr shows in `doit info` and our explain output.

What a compile depends on, besides its source (doit's `file_dep`, content-checked): every header the
compiler read (its `-MD` depfile; those outside the build directory as a shared set, `header_sets`; one
changed since the compile started, by ctime, is recorded without a digest, so the next run rebuilds); the
argv digest, with the roots an identity covers as placeholders (their headers are not tracked per unit:
`identity.identity_covers`); the compiler identity as the platform located it (`toolchain/driver.py`: with
the environment it reads and the programs its driver runs); the sub-build's binary context (unknown:
always stale, with the reason); and the output's own digest (a binary changed behind our back rebuilds).
"""
from __future__ import annotations

import os

from ..core.filestate import first_changed, is_modified, refreshed_file
from ..core.safeio import NotRegularFile, check_regular
from .depfile import TRACKING
from .header_sets import SetChecker
from ..builddir.stamp import stamp_matches
from ..core.stages import CHECK_SIGNATURE



class UnitCheck:
    """Up to date iff argv, compiler, context, headers and output all match the last build.

    `sets` is shared by the units of one graph (headers outside the build directory: `header_sets`).
    """

    __signature__ = CHECK_SIGNATURE

    def __init__(self, argv: str, compiler: str, context_digest: str | None, why_unknown: str | None, output: str,
                 sets: SetChecker):
        self.expect = {"argv": argv, "compiler": compiler, "context": context_digest}
        self.why_unknown = why_unknown
        self.output = output
        self.sets = sets
        self.reason = ""
        self.blocked = ""       # a header that is a FIFO or device: the compiler would block on it

    def __call__(self, task, values) -> bool:
        self.blocked = _first_irregular((values or {}).get("headers") or {})
        self.reason = self._stale_reason(values or {})
        return not self.reason

    def _stale_reason(self, values: dict) -> str:
        if values.get("forced"):
            return f"forced by {values['forced']}"
        if "argv" not in values:
            return "never built"
        if values["argv"] != self.expect["argv"]:
            return "command line changed"
        if values.get("compiler") != self.expect["compiler"]:
            return "compiler changed"
        if self.expect["context"] is None:
            return self.why_unknown or "identity unknown"
        if values.get("context") != self.expect["context"]:
            return "runtime/PTO-ISA identity changed"
        if values.get("tracking") != TRACKING:
            return "headers recorded by an older pypto_build (system headers left out)"
        changed = first_changed(values.get("headers") or {})
        if changed:
            return f"header {changed}"
        if values.get("outside"):
            stale = self.sets.stale(values["outside"])
            if stale:
                return stale
        try:
            st = os.stat(self.output)
        except OSError:
            return f"output {self.output} missing"
        if is_modified(self.output, st, values.get("output")):
            return f"output {self.output} modified since it was built"
        return ""

    def refresh(self, values: dict) -> dict | None:
        """Values with re-stat'ed states for unchanged files whose stat moved (after a touch)."""
        headers = refreshed_states(values.get("headers") or {})
        out = refreshed_file(self.output, values.get("output"))
        if headers is None and out is None:
            return None
        return {**values, "headers": headers or values.get("headers") or {}, "output": out or values.get("output")}

    def __repr__(self) -> str:
        return self.reason or "unit inputs unchanged"


class StepCheck:
    """A step after a compile (link, extraction) is up to date iff its key (tool and argv) matches and its
    input and output are as they were after it ran."""

    __signature__ = CHECK_SIGNATURE

    def __init__(self, key: str, input: str, output: str):
        self.key, self.input, self.output = key, input, output
        self.reason = ""

    def __call__(self, task, values) -> bool:
        values = values or {}
        if "key" not in values:
            self.reason = "never built"
        elif values["key"] != self.key:
            self.reason = "command line or tool changed"
        elif first_changed({self.input: values.get("input")}):
            self.reason = f"input {self.input} changed"
        elif not os.path.exists(self.output):
            self.reason = f"output {self.output} missing"
        elif is_modified(self.output, os.stat(self.output), values.get("output")):
            self.reason = f"output {self.output} modified since it was built"
        else:
            self.reason = ""
        return not self.reason

    def refresh(self, values: dict) -> dict | None:
        """Values with re-stat'ed states for unchanged files whose stat moved (after a touch)."""
        found = refreshed_states({self.input: values.get("input")})
        out = refreshed_file(self.output, values.get("output"))
        if found is None and out is None:
            return None
        return {**values, "input": (found or {}).get(self.input, values.get("input")),
                "output": out or values.get("output")}

    def __repr__(self) -> str:
        return self.reason or "step inputs unchanged"


class StampCheck:
    """The stamp is current iff the identity is known and the file holds exactly it."""

    __signature__ = CHECK_SIGNATURE

    def __init__(self, path: str, fields: dict | None, why_unknown: str | None):
        self.path, self.fields, self.why_unknown = path, fields, why_unknown
        self.reason = ""

    def __call__(self, task, values) -> bool:
        if self.fields is None:
            self.reason = f"no stamp: {self.why_unknown}"
        elif not stamp_matches(self.path, self.fields):
            self.reason = f"{self.path} missing or outdated"
        else:
            self.reason = ""
        return not self.reason

    def __repr__(self) -> str:
        return self.reason or "stamp current"


def refreshed_states(states: dict) -> dict | None:
    """`states` with re-stat'ed entries for unchanged files whose stat moved, or None when none moved."""
    new = {path: refreshed_file(path, state) for path, state in states.items()}
    if all(v is None for v in new.values()):
        return None
    return {path: new[path] or state for path, state in states.items()}


def _first_irregular(paths) -> str:
    """The one-line refusal for the first path that exists but is not a regular file ("" when none)."""
    for path in paths:
        try:
            check_regular(path)
        except NotRegularFile as exc:
            return str(exc)
        except OSError:
            continue
    return ""
