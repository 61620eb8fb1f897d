"""The run stage's check (a doit `uptodate` object): whether a validation verdict still holds, with the reason.

The verdict is keyed on what the golden result it was compared against is keyed on (`golden_key`), so
`validate` and `replay --validate` never disagree. Like the compile stage's checks it returns True/False
(never None: doit would ignore it) and keeps the reason, which `doit info` and explain show.
"""
from __future__ import annotations

from ..core.stages import CHECK_SIGNATURE
from . import golden_key


class VerdictCheck:
    """A validation verdict holds while its inputs (file_dep: binaries, kernel_config.py, golden.py, data/), the
    run configuration and the kept golden result it was compared against hold: the same entry (its seal),
    unedited, golden.pt unchanged, and everything that result is keyed on unchanged (`golden_key.stale`, the
    very check the child's lookup makes: the verdict never outlives the golden result). No kept result, no
    reused verdict."""

    __signature__ = CHECK_SIGNATURE

    def __init__(self, config_key: str, sub: str):
        self.config_key, self.sub = config_key, sub
        self.reason = ""
        self._index: dict | None = None

    def __call__(self, task, values) -> bool:
        values = values or {}
        self._index = None
        if "verdict" not in values:
            self.reason = "never validated"
        elif values.get("config") != self.config_key:
            self.reason = "run configuration changed"
        else:
            self.reason = self._golden_moved(values.get("golden") or {})
        return not self.reason

    def _golden_moved(self, golden: dict) -> str:
        if not golden.get("seal"):
            return "no golden result was kept for the last verdict"
        index, why = golden_key.load(self.sub)
        if index is None:
            return f"golden: {why or 'the kept result is gone'}"
        if index["seal"] != golden["seal"]:
            return "golden: the kept result is not the one the last verdict used"
        known = golden.get("states") or {}
        why = golden_key.stale(self.sub, index, known)
        if why:
            return f"golden: {why}"
        if golden_key.data_changed(self.sub, index, known):
            return f"golden: {golden_key.DATA_KEY} does not match its index"
        self._index = index
        return ""

    def refresh(self, values: dict) -> dict | None:
        golden = values.get("golden") or {}
        if self._index is None:
            return None
        states = golden_key.refreshed_states(self.sub, self._index, golden.get("states") or {})
        return None if states is None else {**values, "golden": {**golden, "states": states}}

    def __repr__(self) -> str:
        return self.reason or "last verdict still valid"
