"""`pypto-build ci-report REPORT.json...`: the JSON reports of every shard of one plan, merged into one.

A merge never makes a missing shard look green: every report must be a shard's
(`ci --shard K/N --json`), all of the same plan (the digest of the whole
directory set) and N, shards 1..N each present exactly once, each report as
long as its shard's share, no directory twice, and the directories together
exactly the plan's (count and digest). Anything else is one line naming the
file (or the missing shard) and nothing is written. The merged JSON is ci's
form (`ok`, `directories`, each directory with its `shard` and, after `ci
--bisect`, its `bisect`) plus `plan` and `shards` (per shard: file,
directories, passed, failed, cache hits, seconds); the JUnit XML holds one test
suite per shard (`run.junit_suite`, which names a bisect's culprits too).
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from xml.etree import ElementTree as ET

from ..core import atomic, safeio
from .bisects import summary
from .run import junit_suite, write_xml
from ..errors import FAILED, OK, UserError
from .shards import MAX_SHARDS, plan_digest

FIX = "pass the files `pypto-build ci --shard K/N --json FILE` wrote, one per shard"
_DIRECTORY_FIELDS = {"path": str, "key": str, "ok": bool, "kind": str, "seconds": (int, float), "error": str,
                     "cached_verdict": bool, "unapplied_pto": list, "cache_hits": int}
_SHARD_FIELDS = {"index": int, "count": int, "plan": str, "directories": int, "assigned": int}


@dataclass(frozen=True)
class ShardReport:
    """One shard's JSON report as read from `file`."""

    file: Path
    data: dict

    @property
    def shard(self) -> dict:
        return self.data["shard"]

    @property
    def name(self) -> str:
        return f"{self.shard['index']}/{self.shard['count']}"

    @property
    def directories(self) -> list[dict]:
        return self.data["directories"]

    def summary(self) -> dict:
        dirs = self.directories
        passed = sum(1 for d in dirs if d["ok"])
        return {"index": self.shard["index"], "file": str(self.file), "directories": len(dirs), "passed": passed,
                "failed": len(dirs) - passed, "cache_hits": sum(d["cache_hits"] for d in dirs),
                "seconds": self.data.get("seconds", 0.0)}


@dataclass(frozen=True)
class MergedReport:
    """Every shard's report of one plan, in shard order."""

    shards: tuple[ShardReport, ...]

    @property
    def directories(self) -> list[dict]:
        return [{**d, "shard": r.shard["index"]} for r in self.shards for d in r.directories]

    @property
    def ok(self) -> bool:
        return all(d["ok"] for r in self.shards for d in r.directories)

    def data(self) -> dict:
        first = self.shards[0].shard
        return {"ok": self.ok, "plan": {"digest": first["plan"], "count": first["count"],
                                        "directories": first["directories"]},
                "shards": [r.summary() for r in self.shards], "directories": self.directories}

    def junit(self) -> ET.Element:
        dirs = self.directories
        root = ET.Element("testsuites", name="pypto-build ci", tests=str(len(dirs)),
                          failures=str(sum(1 for d in dirs if not d["ok"])), errors="0",
                          time=f"{sum(d['seconds'] for d in dirs):.3f}")
        root.extend(junit_suite(r.data) for r in self.shards)
        return root

    def summary_lines(self) -> list[str]:
        """Per shard, then the whole: directories, passed, failed, cache hits (and each shard's seconds)."""
        lines = [f"shard {r.name}: {s['directories']} directories, {s['passed']} passed, {s['failed']} failed, "
                 f"{s['cache_hits']} cache hits, {s['seconds']:.1f} s"
                 for r, s in ((r, r.summary()) for r in self.shards)]
        dirs = self.directories
        failed = sum(1 for d in dirs if not d["ok"])
        hits = sum(d["cache_hits"] for d in dirs)
        lines.append(f"{len(dirs)} directories over {len(self.shards)} shards: {len(dirs) - failed} passed, "
                     f"{failed} failed, {hits} cache hits")
        return lines

    def write_json(self, path: Path) -> None:
        atomic.write_text(Path(path), json.dumps(self.data(), indent=1) + "\n")

    def write_junit(self, path: Path) -> None:
        write_xml(self.junit(), path)


def _is(value: object, kind) -> bool:
    """isinstance, except that a JSON true/false is not a number."""
    return isinstance(value, kind) and (kind is bool or not isinstance(value, bool))


def _shape_error(data: object) -> str:
    """What makes `data` not a shard's report ("" when it is one)."""
    if not isinstance(data, dict) or not isinstance(data.get("directories"), list):
        return "not a `pypto-build ci` JSON report (no directory list)"
    if not _is(data.get("seconds", 0.0), (int, float)):
        return "its \"seconds\" is not a number"
    shard = data.get("shard")
    if not isinstance(shard, dict):
        return "the report of a whole `ci` run, not of a shard (no \"shard\" record)"
    bad = [k for k, t in _SHARD_FIELDS.items() if not _is(shard.get(k), t)]
    if bad or not 1 <= shard["index"] <= shard["count"] <= MAX_SHARDS:
        return f"its \"shard\" record is malformed ({', '.join(bad) or 'index or count'})"
    for i, d in enumerate(data["directories"]):
        wrong = [k for k, t in _DIRECTORY_FIELDS.items() if not isinstance(d, dict) or not _is(d.get(k), t)]
        if wrong:
            return f"directory #{i + 1} lacks or mistypes {', '.join(wrong)}"
        if not isinstance(d.get("bisect"), (dict, type(None))):     # --bisect's: absent, null or an object
            return f"directory #{i + 1} mistypes bisect (an object or null)"
    return ""


def load_shard_report(path: Path) -> ShardReport:
    """Read and check one shard's JSON report (one line naming the file when it is not one)."""
    try:
        data = json.loads(safeio.read_bytes(path))
    except OSError as exc:
        raise UserError(f"{path}: cannot be read ({exc.strerror or exc}); {FIX}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not JSON ({str(exc).splitlines()[0]}); {FIX}") from None
    except RecursionError:
        raise UserError(f"{path}: JSON nested deeper than Python's parser goes, not a report ci wrote; "
                        f"{FIX}") from None
    why = _shape_error(data)
    if why:
        raise UserError(f"{path}: {why}; {FIX}")
    report = ShardReport(Path(path), data)
    if len(report.directories) != report.shard["assigned"]:
        raise UserError(f"{path}: shard {report.name} lists {len(report.directories)} directories but its "
                        f"plan gives it {report.shard['assigned']}; the report is cut short: run that "
                        "shard again")
    return report


def merge_reports(paths: list[Path]) -> MergedReport:
    """Every shard's report of one plan, checked complete (see the module's text); raises UserError."""
    if not paths:
        raise UserError(f"ci-report: no reports given; {FIX}")
    reports = [load_shard_report(Path(p)) for p in paths]
    first = reports[0]
    plan, count, total = first.shard["plan"], first.shard["count"], first.shard["directories"]
    by_index: dict[int, ShardReport] = {}
    for r in reports:
        s = r.shard
        if (s["plan"], s["count"], s["directories"]) != (plan, count, total):
            raise UserError(
                f"{r.file}: shard {r.name} of plan {s['plan'][:16]} ({s['directories']} directories), but "
                f"{first.file} is shard {first.name} of plan {plan[:16]} ({total} directories); merge the reports "
                "of one plan (every shard given the same directories and N)")
        if s["index"] in by_index:
            raise UserError(f"{r.file}: shard {r.name} again (also {by_index[s['index']].file}); pass each "
                            "shard's report once")
        by_index[s["index"]] = r
    missing = [f"{k}/{count}" for k in range(1, count + 1) if k not in by_index]
    if missing:
        raise UserError(f"shard {', '.join(missing)} missing: no report among the {len(reports)} given; pass "
                        "every shard's report (a shard whose job died before writing one must run again)")
    seen: dict[str, Path] = {}
    for r in reports:
        for d in r.directories:
            if d["key"] in seen:
                raise UserError(f"{r.file}: directory {d['key']} also in {seen[d['key']]}; a directory "
                                "belongs to one shard: merge the reports of one plan")
            seen[d["key"]] = r.file
    if len(seen) != total:
        raise UserError(f"{first.file}: the reports hold {len(seen)} directories, plan {plan[:16]} has {total}; "
                        "a report was edited or belongs to another run: run the shards again")
    if plan_digest(seen) != plan:
        raise UserError(f"{first.file}: the reports' directories are not those of plan {plan[:16]}; a report "
                        "was edited or belongs to another run: run the shards again")
    return MergedReport(tuple(by_index[k] for k in range(1, count + 1)))


def ci_report_verb(args) -> int:
    """`pypto-build ci-report` with parsed arguments: merge, write, say what failed and the summary."""
    merged = merge_reports(args.reports)
    if args.junit_xml:
        merged.write_junit(args.junit_xml)
    if args.json:
        merged.write_json(args.json)
    for d in merged.directories:
        if not d["ok"]:
            print(f"pypto-build ci-report: FAILED {d['kind']} {d['path']} (shard {d['shard']}/{len(merged.shards)}): "
                  f"{d['error'].partition(chr(10))[0] or 'failed'}", file=sys.stderr)
            for said in summary(d.get("bisect")):
                print(f"pypto-build ci-report: {d['path']}: {said}", file=sys.stderr)
    for line in merged.summary_lines():
        print(f"pypto-build ci-report: {line}")
    return OK if merged.ok else FAILED      # as ci: 1 if any directory is not 0
