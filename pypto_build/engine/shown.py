"""A run shown by the reporter `pypto-build doit run` was asked for (`--reporter`, `--output-file`), while the
pipeline's reporter still hears every event: its outcomes are the run's result (`pipeline.BuildResult`).

doit takes one reporter; `Shown` is one that says each event of doit's reporter interface to two.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


class Shown:
    """doit's reporter interface, each event said to `kept` (the pipeline's, which collects) and then to `shown`
    (what the user reads)."""

    def __init__(self, shown: Any, kept: Any):
        self.shown, self.kept = shown, kept

    def _both(self, event: str, *args) -> None:
        for reporter in (self.kept, self.shown):
            if hasattr(reporter, event):        # doit asks `initialize` only of a reporter that has it
                getattr(reporter, event)(*args)

    def initialize(self, tasks, selected_tasks):
        self._both("initialize", tasks, selected_tasks)

    def get_status(self, task):
        self._both("get_status", task)

    def execute_task(self, task):
        self._both("execute_task", task)

    def add_failure(self, task, exception):
        self._both("add_failure", task, exception)

    def add_success(self, task):
        self._both("add_success", task)

    def skip_uptodate(self, task):
        self._both("skip_uptodate", task)

    def skip_ignore(self, task):
        self._both("skip_ignore", task)

    def cleanup_error(self, exception):
        self._both("cleanup_error", exception)

    def runtime_error(self, msg):
        self._both("runtime_error", msg)

    def teardown_task(self, task):
        self._both("teardown_task", task)

    def complete_run(self):
        self._both("complete_run")


@contextlib.contextmanager
def shown(given: dict, params: dict, reporters: dict, kept: Any, default: type) -> Iterator[None]:
    """doit's `run` values (`params`) set to show the run with the reporter `given` names (of `reporters`; none
    named: `default`) on the stream it names (`outfile`: a path is opened here and closed after the run),
    `kept` hearing every event too. Nothing changes when `given` names neither."""
    if "reporter" not in given and "outfile" not in given:
        yield
        return
    cls = reporters[given["reporter"]] if "reporter" in given else default
    with contextlib.ExitStack() as stack:
        out = params["outfile"]
        if isinstance(out, str):
            out = stack.enter_context(open(out, "w", encoding="utf-8"))
        display = cls(out, {"failure_verbosity": params.get("failure_verbosity", 0)})
        params["outfile"], params["reporter"] = out, display if kept is None else Shown(display, kept)
        yield
