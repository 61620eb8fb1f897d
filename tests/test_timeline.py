"""--trace, compdb and the [done/total] status line."""
from __future__ import annotations

import io
import json
import subprocess

import pytest

from pypto_build.testing import synth
from pypto_build.api import build
from pypto_build.plan.graph import load_graph
from pypto_build.platforms.host.places import host_binary


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.slow
def test_trace_has_one_span_per_task_run_on_at_most_j_lanes(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=5)
    trace = tmp_path / "t.json"
    result = build(root, jobs=2, trace=trace)
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert sorted(e["name"] for e in spans) == result.names("ran")
    assert {e["tid"] for e in spans} <= {0, 1}
    assert all(e["dur"] > 0 for e in spans if e["name"].startswith("compile:"))
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert names <= {"worker 0", "worker 1"}


def test_compdb_lists_every_unit_with_its_command(l2):
    out = subprocess.run(["pypto-build", "compdb", str(l2)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    entries = json.loads((l2 / "compile_commands.json").read_text())
    units = [u for p in load_graph(l2).plans for u in p.units]
    assert len(entries) == len(units) == 4
    by_file = {e["file"]: e for e in entries}
    k1 = by_file[str(l2 / "kernels/aiv/main_incore_1_aiv.cpp")]
    assert k1["directory"] == str(l2) and "-D__DAV_VEC__" in k1["arguments"]
    assert k1["output"] == str(l2 / host_binary("kernels/aiv/main_incore_1_aiv.cpp"))


@pytest.mark.slow
def test_status_line_on_a_terminal_plain_lines_otherwise(tmp_path):
    root = synth.write_l2(tmp_path / "d", kernels=2)
    term = Terminal()
    build(root, progress=term)
    text = term.getvalue()
    assert "\r\x1b[K[4/4] " in text and text.rstrip().endswith("1 stamp(s) written")
    plain = io.StringIO()
    synth.kernel_path(root, 0).write_text(synth.kernel_path(root, 0).read_text() + "// x\n")
    build(root, progress=plain)
    assert "\r" not in plain.getvalue() and "[" not in plain.getvalue().splitlines()[0]
