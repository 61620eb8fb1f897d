"""`uptodate` objects: what doit's file_dep does not cover, with reasons.

doit tracks neither command lines, nor identities, nor the headers a compiler
read, nor whether a target was modified; `UnitCheck` does. Each returns
True/False (never None: doit would ignore it, which fails open) and keeps the
reason, which its repr shows in `doit info` and our explain output.
"""
from __future__ import annotations

import os

from .checker import is_modified, refreshed
from .depfile import TRACKING
from .header_sets import SetChecker
from .stamp import stamp_matches


class UnitCheck:
    """Up to date iff argv, compiler, context, headers and output all match the last build.

    `sets` is shared by the units of one graph (headers outside the build directory: `header_sets`).
    """

    def __init__(self, argv: str, compiler: str, context: str | None, why_unknown: str | None, output: str,
                 sets: SetChecker | None = None):
        self.expect = {"argv": argv, "compiler": compiler, "context": context}
        self.why_unknown = why_unknown
        self.output = output
        self.sets = sets or SetChecker()
        self.reason = ""

    def __call__(self, task, values) -> bool:
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
        for header, state in (values.get("headers") or {}).items():
            try:
                st = os.stat(header)
            except OSError:
                return f"header {header} removed"
            if is_modified(header, st, state):
                return f"header {header} changed"
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
        changed = False
        headers = dict(values.get("headers") or {})
        for path, state in headers.items():
            new = _refresh(path, state)
            if new is not None:
                headers[path], changed = new, True
        out = _refresh(self.output, values.get("output"))
        if not changed and out is None:
            return None
        return {**values, "headers": headers, "output": out or values.get("output")}

    def __repr__(self) -> str:
        return self.reason or "unit inputs unchanged"


class StampCheck:
    """The stamp is current iff the identity is known and the file holds exactly it."""

    def __init__(self, path: str, stamp: dict | None, why_unknown: str | None):
        self.path, self.stamp, self.why_unknown = path, stamp, why_unknown
        self.reason = ""

    def __call__(self, task, values) -> bool:
        if self.stamp is None:
            self.reason = f"no stamp: {self.why_unknown}"
        elif not stamp_matches(self.path, self.stamp):
            self.reason = f"{self.path} missing or outdated"
        else:
            self.reason = ""
        return not self.reason

    def __repr__(self) -> str:
        return self.reason or "stamp current"


def _refresh(path: str, state) -> list | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not state or is_modified(path, st, state):
        return None
    return refreshed(path, st, state)


class PtoasCheck:
    """ptoas must rerun when it (or its flags) changed; the .pto itself is a file_dep.

    On first sight (no state) a raw output at least as new as its `.pto` is
    adopted as ir.compile() left it (PyPTO's own mtime rule, used only once);
    afterwards content decides. Adopted units are not rerun when ptoas changes:
    we never knew which ptoas produced them.
    """

    def __init__(self, pto: str, raw: str, ptoas_key: str | None):
        self.pto, self.raw, self.key = pto, raw, ptoas_key
        self.reason = ""

    def __call__(self, task, values) -> bool:
        values = values or {}
        self.reason = ""
        if self.key is None:
            return True                      # no ptoas: only a .pto content change matters
        if "ptoas" not in values:
            self.reason = "never run"
        elif values["ptoas"] not in ("adopted", self.key):
            self.reason = "ptoas changed"
        return not self.reason

    def adopt(self) -> dict | None:
        try:
            if os.stat(self.raw).st_mtime >= os.stat(self.pto).st_mtime:
                return {"ptoas": "adopted"}
        except OSError:
            pass
        return None

    def __repr__(self) -> str:
        return self.reason or "ptoas unchanged"


class SpliceCheck:
    """Re-splice when the raw ptoas output changed since the last splice (or adoption)."""

    def __init__(self, raw: str, adopt_fn, record: str):
        self.raw, self._adopt_fn, self.record = raw, adopt_fn, record
        self.reason = ""

    def __call__(self, task, values) -> bool:
        values = values or {}
        try:
            st = os.stat(self.raw)
        except OSError:
            self.reason = ""
            return True                      # nothing to splice from (ptoas never ran)
        self.reason = f"{self.raw} changed" if is_modified(self.raw, st, values.get("raw")) else ""
        return not self.reason

    def adopt(self) -> dict | None:
        return self._adopt_fn(self.raw, self.record)

    def refresh(self, values: dict) -> dict | None:
        new = _refresh(self.raw, values.get("raw"))
        return None if new is None else {**values, "raw": new}

    def __repr__(self) -> str:
        return self.reason or "raw ptoas output unchanged"


class VerdictCheck:
    """A validation verdict holds while its inputs (file_dep) and the run configuration are unchanged."""

    def __init__(self, config_key: str):
        self.config_key = config_key
        self.reason = ""

    def __call__(self, task, values) -> bool:
        values = values or {}
        if "verdict" not in values:
            self.reason = "never validated"
        elif values.get("config") != self.config_key:
            self.reason = "run configuration changed"
        else:
            self.reason = ""
        return not self.reason

    def __repr__(self) -> str:
        return self.reason or "last verdict still valid"
