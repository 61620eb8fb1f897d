"""`uptodate` objects of the `.pto` stage: when ptoas must rerun, when a raw output must be re-spliced.

Like `compile/checks.py` (the compile units'), each returns True/False and keeps its
reason for `doit info` and explain; first sight is decided by content.
"""
from __future__ import annotations

import os

from ..core.filestate import is_modified, refreshed_file
from ..core.stages import CHECK_SIGNATURE


class PtoasCheck:
    """ptoas must rerun when it (or its flags) changed; the .pto itself is a file_dep.

    First sight (no state) is decided by content, never by mtimes: with ptoas
    available the unit runs once and `run_ptoas` keeps the raw output as it is
    when ptoas reproduces it; without ptoas nothing can tell an edited `.pto`
    from an unedited one, so the directory is taken as found (`adopt`) and
    later `.pto` edits are seen by content. Units taken as found are not rerun
    when ptoas changes: we never knew which ptoas produced them.
    """

    __signature__ = CHECK_SIGNATURE

    def __init__(self, pto: str, raw: str, ptoas_key: str | None, record_fn=None):
        self.pto, self.raw, self.key = pto, raw, ptoas_key
        self._record_fn = record_fn
        self.reason = ""
        # Without ptoas the task only reports an edit it cannot apply and writes nothing, so after such a
        # failure a `.pto` back as its last success recorded it is up to date again (a reverted edit).
        self.failure_writes_nothing = ptoas_key is None

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

    def adopt(self, _values_of=None) -> dict | None:
        if self.key is not None or not os.path.isfile(self.raw):
            return None                      # ptoas checks it once; no raw output: it must be made
        return {"ptoas": "adopted", "rewrote": False}

    def adopted(self, _values: dict) -> None:
        """Record the `.pto` content taken as found (a building run only)."""
        if self._record_fn is not None:
            self._record_fn()

    def __repr__(self) -> str:
        return self.reason or "ptoas unchanged"


class SpliceCheck:
    """Re-splice when the raw ptoas output changed since the last splice (or first sight).

    First sight: when the raw output is still the one the directory came with
    (ptoas did not rewrite it: it was taken as found or ptoas reproduced it),
    the kernel files are taken as they are — their bodies may be hand edits —
    and recorded so a later splice can tell. Otherwise the new body is spliced.
    """

    __signature__ = CHECK_SIGNATURE

    def __init__(self, raw: str, ptoas_task: str, adopt_fn, record_fn):
        self.raw, self.ptoas_task = raw, ptoas_task
        self._adopt_fn, self._record_fn = adopt_fn, record_fn
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

    def adopt(self, values_of) -> dict | None:
        ptoas = values_of(self.ptoas_task) or {}
        if "ptoas" not in ptoas or ptoas.get("rewrote", True):
            return None                      # ptoas wrote a new raw output here: splice it
        return self._adopt_fn()

    def adopted(self, values: dict) -> None:
        """Write the splice record of the adopted kernel bodies (a building run only)."""
        self._record_fn(values)

    def refresh(self, values: dict) -> dict | None:
        new = refreshed_file(self.raw, values.get("raw"))
        return None if new is None else {**values, "raw": new}

    def __repr__(self) -> str:
        return self.reason or "raw ptoas output unchanged"
