"""`ci --bisect`: each directory whose validation FAILED is bisected against a good variant; the answer goes in its
entry of the reports.

Only a verdict FAILED is bisected (`wanted`): not a passing directory, not a unit or build failure, not bad
input. The good variant (`BisectPlan.good_for`): with `--good-dir BASE`, the good copy of a directory is the same
relative path under BASE as the directory is under the common parent of every DIR given (with one DIR: BASE/<its
name>); a copy that is not there falls back to the directory's history, and the entry says so. Without
`--good-dir`, the history's newest PASSED variant. A bisect that cannot run (no good variant, a copy of another
program) is the entry's one-line `error`: the directory fails as it did, no more. ci's exit status never depends
on a bisect.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..core import stages
from ..errors import FAILED, PyptoBuildError, UserError, one_line

MESSAGE_ROOM = 250          # of a JUnit failure's message kept for the directory's own error when bisected


@dataclass(frozen=True)
class Good:
    """What one failing directory is bisected against: a good copy (None: the history's newest PASSED), the copy
    looked for under --good-dir and not found, and the method (None: the bisect's default)."""

    directory: Path | None = None
    missing: Path | None = None
    method: str | None = None


@dataclass(frozen=True)
class BisectPlan:
    """--bisect's choices for a whole ci run: --good-dir's BASE and the common parent of every DIR given (so a
    shard maps its directories as the whole run does), and --bisect-method."""

    base: Path | None = None
    parent: Path | None = None
    method: str | None = None

    def good_for(self, given: str | os.PathLike) -> Good:
        if self.base is None or self.parent is None:
            return Good(method=self.method)
        copy = self.base / os.path.relpath(_absolute(given), self.parent)
        if copy.is_dir():
            return Good(copy, method=self.method)
        return Good(missing=copy, method=self.method)


def _absolute(path: str | os.PathLike) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


def plan(dirs: list, bisect: bool, good_dir: Path | None, method: str | None) -> BisectPlan | None:
    """The plan from ci's arguments (every DIR given, before sharding), or None without --bisect; --good-dir or
    --bisect-method without --bisect, or a --good-dir that is not a directory, is bad input."""
    if not bisect:
        for name, value in (("--good-dir", good_dir), ("--bisect-method", method)):
            if value is not None:
                raise UserError(f"{name}: only with --bisect; add --bisect to bisect the directories whose "
                                "validation FAILED, or drop it")
        return None
    if good_dir is None:
        return BisectPlan(method=method)
    if not Path(good_dir).is_dir():
        raise UserError(f"--good-dir {good_dir}: not a directory; give the folder that holds the good copies "
                        "(each at the same relative path as its DIR under the DIRs' common parent)")
    given = [_absolute(d) for d in dirs]
    parent = os.path.dirname(given[0]) if len(set(given)) == 1 else os.path.commonpath(given)
    return BisectPlan(Path(good_dir).resolve(), Path(parent), method)


def wanted(exit_status: int, kind: str, not_validated: bool, result: object) -> bool:
    """A verdict FAILED: the directory was validated, and only its validation failed (no unit, no bad input)."""
    failures = getattr(result, "failures", None)
    if exit_status != FAILED or kind != "validate" or not_validated or not failures:
        return False
    return all(f.task.startswith(stages.prefix(stages.VALIDATE)) for f in failures)


def run(root: Path, good: Good, platform: str | None, cache_dir: str | None,
        say: Callable[[str], None]) -> dict:
    """The bisect of `root` as its entry's `bisect` object: the report's JSON (`{"programs": [...]}` for a parent
    of several programs), or `{"error": one line}`; either with `notes` saying when a good copy was missing."""
    from ..culprits import bisect

    missing = ([f"no good copy at {good.missing}: compared with the newest PASSED variant in the history"]
               if good.missing is not None else [])
    for line in missing:
        say(f"[bisect] {line}")
    try:
        reports = bisect(root, good=good.directory, method=good.method, platform=platform, cache_dir=cache_dir,
                         say=say)
    except (PyptoBuildError, OSError) as exc:
        if isinstance(exc, OSError):
            from ..core.oserrors import describe
            exc = describe(exc)
        return {"error": one_line(exc), "good_dir": _text(good.directory), "notes": missing}
    data = reports[0].as_json() if len(reports) == 1 else {"programs": [r.as_json() for r in reports]}
    data["good_dir"] = _text(good.directory)
    data["notes"] = missing + data.get("notes", [])
    return data


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


def summary(found: dict | None) -> list[str]:
    """An entry's `bisect` in words, one line each: the culprits (unit and source), the first divergent task, or
    why nothing is blamed or the bisect could not run (for the JUnit failure and ci's lines)."""
    if not found:
        return []
    lines = [f"bisect: {note}" for note in found.get("notes", []) if note.startswith("no good copy at ")]
    if "error" in found:
        return [f"bisect could not run: {found['error']}", *lines]
    for program in found.get("programs", [found]):
        where = f" ({program['directory']})" if "programs" in found else ""
        culprits = [f"{c['unit']} ({c['source']})" for c in program.get("culprits", [])]
        if culprits:
            lines.append(f"bisect{where}: culprit{'s' if len(culprits) > 1 else ''} {', '.join(culprits)}")
        elif program.get("outcome") == "good fails":
            lines.append(f"bisect{where}: the good variant ({program.get('good')}) fails too: nothing to blame")
        else:
            lines.append(f"bisect{where}: the two variants agree: nothing to blame")
        if program.get("first_divergence"):
            lines.append(f"bisect{where}: first divergent task: {_divergence(program['first_divergence'])}")
    return lines


def _divergence(first: dict) -> str:
    """The trace's first divergent task in one line: its scalar fields, those that name the task first."""
    lead = ("index", "task", "func_id", "kernel", "source", "output")
    keys = [k for k in lead if k in first] + [k for k in first if k not in lead]
    return ", ".join(f"{k}={first[k]}" for k in keys if isinstance(first[k], (str, int, float)))


def junit_failure(error: str, found: dict | None) -> tuple[str, str]:
    """A failed directory's JUnit failure message and text with its bisect's summary added (message: the
    error's first line, cut to make room, then the summary)."""
    headline = error.partition("\n")[0] or "failed"
    lines = summary(found)
    if not lines:
        return headline[:500], error
    message = one_line(headline, MESSAGE_ROOM) + " | " + "; ".join(lines)
    return message[:500], error + "\n" + "\n".join(lines)
