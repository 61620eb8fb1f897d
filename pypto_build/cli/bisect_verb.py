"""The `bisect` verb with parsed option values: the runs as they go, then the report; `--json FILE` for tools."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core import atomic


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dir", type=Path, metavar="DIR", help="the build directory whose current variant fails")
    p.add_argument("--good", metavar="VARIANT|DIR2",
                   help="the good variant: an id `pypto-build history DIR` prints, or another build directory of "
                        "the same program (default: the newest PASSED variant in DIR's history)")
    p.add_argument("--against-good", action="store_true",
                   help="judge each run against the good variant's outputs on the same inputs (default: golden.py)")
    p.add_argument("--rtol", type=float, help="with --against-good: relative tolerance (default golden.py's RTOL)")
    p.add_argument("--atol", type=float, help="with --against-good: absolute tolerance (default golden.py's ATOL)")
    p.add_argument("--method", choices=("trace", "mix"),
                   help="trace: compare the two runs' arguments dumps task by task; mix: run mixes of the two "
                        "variants' binaries (default: trace where the platform's dump carries payloads, then mix "
                        "when the trace cannot name a unit)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON to FILE")
    p.add_argument("--platform", help="the platform to build and run on (default: the one DIR records)")
    p.add_argument("--cache-dir", help="the artefact cache's folder; the kept variants live beside it")


def bisect_verb(args: argparse.Namespace) -> int:
    """`pypto-build bisect DIR`: exit 0 when it names a culprit, 1 when there is nothing to blame, 2 bad input."""
    from ..culprits import bisect

    reports = bisect(args.dir, good=args.good, method=args.method, against_good=args.against_good, rtol=args.rtol,
                     atol=args.atol, platform=args.platform, cache_dir=args.cache_dir,
                     say=lambda line: print(line, flush=True))
    for report in reports:
        print("\n".join(report.lines()), flush=True)
    if args.json is not None:
        data = reports[0].as_json() if len(reports) == 1 else {"programs": [r.as_json() for r in reports]}
        atomic.write_text(args.json, json.dumps(data, indent=1) + "\n")
    return 0 if any(r.status == 0 for r in reports) else 1
