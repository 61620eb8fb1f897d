"""`pypto-build example`: copy the example build directory shipped with the package, replay and validate it,
then edit one kernel and replay again to show that only that kernel recompiles."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from . import stages
from .api import run_graph
from .graph import load_graph

EXAMPLES = Path(__file__).resolve().parent / "examples"


def run_example(args) -> int:
    """Copy the shipped example, replay it with validation, then show one edit-rebuild-replay loop."""
    name, what, kernel = (("two_chips", "two chip programs on two ranks, comm-free",
                           "next_levels/chip_b/kernels/aiv/chip_b_incore_1_aiv.cpp") if args.l3 else
                          ("matmul_relu", "out = relu(a @ b + bias)", "kernels/aiv/matmul_relu_incore_1_aiv.cpp"))
    dest = args.dest or Path("pypto_build_example_l3" if args.l3 else "pypto_build_example")
    fresh = not dest.exists()
    if fresh:
        shutil.copytree(EXAMPLES / name, dest)
        print(f"pypto-build: copied the example ({what}) to {dest}")

    def replay_once() -> bool:
        graph = load_graph(dest.resolve())      # the recorded platform (a2a3sim), or host where simpler is missing
        result = run_graph(graph, tasks=[stages.VALIDATE], force=(stages.prefix(stages.VALIDATE),), jobs=args.jobs,
                           progress=sys.stdout, check=False)
        return result.ok and not result.failures

    if not replay_once():
        return 1
    kernel = dest / kernel
    if fresh:
        print(f"\npypto-build: now editing {kernel} (a comment) and replaying: only that kernel recompiles")
        with open(kernel, "a", encoding="utf-8") as handle:
            handle.write("// edited by `pypto-build example` to show an incremental rebuild\n")
        if not replay_once():
            return 1
    print(f"\npypto-build: now `pypto-build watch --validate {dest}` and edit the kernels (or ptoas/*.pto) "
          f"under it: every save rebuilds, runs and validates (or, once: `pypto-build replay --validate {dest}`)")
    return 0
