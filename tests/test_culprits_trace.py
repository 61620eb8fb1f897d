"""Argument dumps with tensors (the host runtime writes simpler's format), the one reader, and the comparison of
two dumps that finds the first task whose outputs differ: real builds, real `pypto-build replay` runs."""
from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import copy_dir
from pypto_build.api import build
from pypto_build.culprits import compare, kernel_map, read_dump
from pypto_build.culprits.trace import inputs_differ
from pypto_build.errors import UserError
from pypto_build.run.golden import load_golden
from pypto_build.testing import synth

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++: nothing can be built")
KERNELS, SIZE, RTOL, ATOL = 4, 64, 1e-5, 1e-5


@pytest.fixture(scope="session")
def built_four(tmp_path_factory) -> Path:
    root = synth.write_l2(tmp_path_factory.mktemp("culprits") / "l2", kernels=KERNELS, golden=True, size=SIZE)
    build(root)
    return root


@pytest.fixture
def d(built_four, tmp_path) -> Path:
    return copy_dir(built_four, tmp_path / "l2")


@pytest.fixture(scope="session")
def good_dump(built_four, tmp_path_factory) -> Path:
    return dumped(copy_dir(built_four, tmp_path_factory.mktemp("good") / "l2"), tmp_path_factory.mktemp("dumps"))


def dumped(root: Path, keep: Path, *, tag: str = "run") -> Path:
    """Run the program once with the full argument dump (`pypto-build replay --dump-args 2`, a real process);
    return a copy of its args_dump folder (the next run of `root` replaces the original)."""
    out = subprocess.run([sys.executable, "-m", "pypto_build", "replay", str(root), "--dump-args", "2"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return Path(shutil.copytree(root / "dfx_outputs" / "args_dump", keep / tag))


def edit_kernel(root: Path, func_id: int, old: str, new: str) -> None:
    path = synth.kernel_path(root, func_id)
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def steps(a):
    """The synthetic program's `out` after each task: k = 0: a; k >= 1: out * 0.5 + a * (k + 1)."""
    out = a * 1.0
    found = [out]
    for k in range(1, KERNELS):
        out = out * 0.5 + a * (k + 1)
        found.append(out)
    return found


def test_a_host_dump_holds_every_tensor_the_kernels_saw(good_dump, built_four):
    """Level 2 on the host: one task per submission, in order, with its func_id; each input's payload is the
    tensor before the kernel ran, each output's the tensor after it returned (checked against golden.py's
    inputs and every step of its computation), scalars inline."""
    dump = read_dump(good_dump)
    a = dict(load_golden(built_four).inputs())["a"]
    assert dump.level == 2 and not dump.lossy
    assert [(t.index, t.task_id, t.func_id) for t in dump.tasks] == [(k, k, (k,)) for k in range(KERNELS)]
    want = steps(a)
    for k, task in enumerate(dump.tasks):
        by_stage = {(arg.stage, arg.arg_index): arg for arg in task.args}
        torch.testing.assert_close(by_stage["before_dispatch", 0].tensor(), a, rtol=0, atol=0)
        assert by_stage["before_dispatch", 0].name == "a" and by_stage["before_dispatch", 2].value == SIZE
        (out,) = task.outputs
        assert (out.arg_index, out.name, out.role) == (1, "out", "output" if k == 0 else "inout")
        torch.testing.assert_close(out.tensor(), want[k], rtol=0, atol=0)
        if k:
            torch.testing.assert_close(by_stage["before_dispatch", 1].tensor(), want[k - 1], rtol=0, atol=0)
    golden = load_golden(built_four)
    expected = golden.expected(dict(golden.inputs()))
    torch.testing.assert_close(dump.tasks[-1].outputs[0].tensor(), expected["out"], rtol=0, atol=0)


def test_compare_names_the_first_task_of_the_edited_kernel(d, good_dump, tmp_path):
    """A kernel edited to compute other numbers: its first task is named, with its kernel, source, output,
    the error figures and first differing element computed from the tensors; the later task that reads its
    output is counted, not blamed."""
    edit_kernel(d, 2, "3.0f", "3.5f")                     # task 2: out = out * 0.5 + a * 3.5 (was 3)
    current = dumped(d, tmp_path)
    result = compare(read_dump(good_dump), read_dump(current), RTOL, ATOL, kernel_map(d))
    first = result.first
    assert result.parting is None and result.aligned == KERNELS and result.uncompared == () and result.certain
    assert (first.index, first.func_id, first.kernel, first.arg_index, first.output) == \
        (2, (2,), synth.kernel_name("main", 2), 1, "out")
    assert first.source == synth.kernel_path(d, 2).resolve()
    assert first.later == 1 and [x.index for x in result.divergent] == [2, 3]
    assert first.param == "out"                                     # the kernel's own name for it
    good_tasks, current_tasks = read_dump(good_dump).tasks, read_dump(current).tasks
    assert inputs_differ(good_tasks[2], current_tasks[2], RTOL, ATOL) is None      # the difference starts here
    assert inputs_differ(good_tasks[3], current_tasks[3], RTOL, ATOL) == "input out (argument 1) differs"
    good_out = read_dump(good_dump).tasks[2].outputs[0].tensor().to(torch.float64)
    cur_out = read_dump(current).tasks[2].outputs[0].tensor().to(torch.float64)
    diff = (cur_out - good_out).abs()
    bad = diff > ATOL + RTOL * good_out.abs()
    assert first.differing == int(bad.sum()) > 0 and first.numel == SIZE
    assert first.max_abs == pytest.approx(float(diff.max())) and first.max_abs > 0.1
    assert first.max_rel == pytest.approx(float((diff / good_out.abs())[bad].max()))
    i = int(bad.nonzero()[0])
    assert first.first_index == (i,)
    assert (first.good_value, first.current_value) == (pytest.approx(float(good_out[i])),
                                                       pytest.approx(float(cur_out[i])))


def test_a_harmless_edit_is_not_blamed(d, good_dump, tmp_path):
    """The binary changes, the numbers do not: every aligned task agrees."""
    edit_kernel(d, 1, "out[i] = ", "out[i] = 0.0f + ")
    result = compare(read_dump(good_dump), read_dump(dumped(d, tmp_path)), RTOL, ATOL, kernel_map(d))
    assert result.first is None and result.divergent == () and result.parting is None
    assert result.aligned == KERNELS and result.certain


def test_a_task_sequence_that_differs_parts(d, good_dump, tmp_path):
    """The orchestration submits one task fewer: where the sequences part is named, with the kernel the good
    run had there, and the tasks before it are compared."""
    orch = d / "orchestration" / "main.cpp"
    text = orch.read_text()
    assert "rt_submit_aiv_task(3, params_t3);" in text
    orch.write_text(text.replace("rt_submit_aiv_task(3, params_t3);", ""))
    result = compare(read_dump(good_dump), read_dump(dumped(d, tmp_path)), RTOL, ATOL, kernel_map(d))
    parting = result.parting
    assert (parting.index, parting.good_func_id, parting.current_func_id) == (3, (3,), None)
    assert (parting.good_kernel, parting.current_kernel) == (synth.kernel_name("main", 3), None)
    assert (parting.good_tasks, parting.current_tasks) == (4, 3)
    assert parting.describe() == (f"task 3: good runs func_id 3 ({synth.kernel_name('main', 3)}), current has "
                                  "ended (4 vs 3 tasks)")
    assert result.aligned == 3 and result.first is None


def test_a_truncated_output_is_neither_blamed_nor_cleared(d, good_dump, tmp_path):
    """The culprit's output marked truncated (its arena was too small): that task cannot be compared, so it is
    listed as such; the next differing task is reported, flagged as not certainly the first."""
    edit_kernel(d, 2, "3.0f", "3.5f")
    current = dumped(d, tmp_path)
    manifest = current / "args_dump.json"
    doc = json.loads(manifest.read_text())
    (record,) = [r for r in doc["args"] if r["task_id"] == f"0x{2:016x}" and r["stage"] == "after_completion"]
    record["truncated"] = True
    manifest.write_text(json.dumps(doc))
    result = compare(read_dump(good_dump), read_dump(current), RTOL, ATOL, kernel_map(d))
    assert [(u.index, u.arg_index, u.output, u.why) for u in result.uncompared] == \
        [(2, 1, "out", "truncated in the current dump")]
    assert result.first.index == 3 and not result.certain
    assert inputs_differ(read_dump(good_dump).tasks[3], read_dump(current).tasks[3], RTOL, ATOL) is not None


def damage(doc: dict, what: str) -> None:
    if what == "field":
        del doc["args"][3]["stage"]
    elif what == "type":
        doc["args"][0]["shape"] = "16"
    elif what == "count":
        doc["total_args"] += 1
    elif what == "past":
        doc["args"][-1]["bin_offset"] += 4
    elif what == "size":
        doc["args"][0]["bin_size"] -= 4
    elif what == "dtype":
        doc["args"][0]["dtype"] = "COMPLEX64"


@pytest.mark.parametrize("what,says", [
    ("json", "is not JSON"), ("field", "args[3] has no 'stage'"), ("type", "args[0] 'shape' is '16', not a list"),
    ("count", "'total_args' is"), ("past", "lies past the end of args.bin"), ("size", "its FLOAT32[64] view holds"),
    ("dtype", "not one of simpler's DataType names"), ("bin", "its payload file args.bin is missing"),
    ("foreign", "is not a JSON object"), ("none", "no argument dump there"),
])
def test_a_damaged_dump_is_one_line(good_dump, tmp_path, what, says):
    folder = Path(shutil.copytree(good_dump, tmp_path / "dump"))
    manifest = folder / "args_dump.json"
    if what == "json":
        manifest.write_text(manifest.read_text()[:100])
    elif what == "bin":
        (folder / "args.bin").unlink()
    elif what == "foreign":
        manifest.write_text("[1, 2]")
    elif what == "none":
        manifest.unlink()
    else:
        doc = json.loads(manifest.read_text())
        damage(doc, what)
        manifest.write_text(json.dumps(doc))
    with pytest.raises(UserError) as info:
        read_dump(folder)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{manifest}: ") and says in message
    assert "--dump-args 2" in message


def test_the_reader_takes_the_folder_its_manifest_or_dfx_outputs(good_dump, tmp_path):
    dfx = tmp_path / "dfx_outputs"
    shutil.copytree(good_dump, dfx / "args_dump")
    found = [read_dump(p).tasks for p in (good_dump, good_dump / "args_dump.json", dfx)]
    assert found[0] == found[1] == found[2] and len(found[0]) == KERNELS


def written(tmp_path: Path, tag: str, outputs: list) -> Path:
    """A dump written by the host runtime's writer (level 2) of one task per output tensor (func_id k), read
    back from disk by the reader: the comparison rule on exact numbers."""
    from pypto_build.platforms.host.runtime import dfx
    from pypto_build.platforms.host.runtime.trace import ArgRecord, RunTrace, TaskRecord

    dtypes = {torch.float32: "FLOAT32", torch.float16: "FLOAT16", torch.int32: "INT32", torch.bool: "BOOL"}
    tasks = []
    for k, t in enumerate(outputs):
        strides = tuple(t.stride())
        out = ArgRecord("tensor", "out", "output", dtypes[t.dtype], tuple(t.shape), strides, 0, True,
                        after=t.contiguous().numpy().tobytes())
        tasks.append(TaskRecord(k, k, f"k{k}", "aiv", [out], 0, 0))
    dfx.write_args_dump(RunTrace(tasks, (0, 0)), tmp_path / tag, 2)
    return tmp_path / tag


def test_the_comparison_rule(tmp_path):
    """|current - good| <= atol + rtol * |good| (good is the reference), NaN equal only to NaN, a shape or dtype
    change is a difference; the figures are those of the differing elements."""
    nan = float("nan")
    good = [torch.tensor([1.0, nan, 100.0]), torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0]),
            torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1.0, 2.0]), torch.tensor([True, False]),
            torch.tensor([0.0, 4.0])]
    current = [torch.tensor([1.0 + 0.5e-5, nan, 100.0009]),      # within 1e-5 + 1e-5 * |good|
               torch.tensor([0.0, nan]),                          # NaN against a number: differs
               torch.tensor([1.0, 2.0, 3.0]),                     # a shape change
               torch.tensor([1.0, 2.0]),                          # a dtype change (int32 -> float32)
               torch.tensor([1.0, 2.0], dtype=torch.float16),
               torch.tensor([True, True]),
               torch.tensor([0.5, 4.0])]
    result = compare(read_dump(written(tmp_path, "good", good)), read_dump(written(tmp_path, "cur", current)),
                     1e-5, 1e-5)
    found = {d.index: d for d in result.divergent}
    assert sorted(found) == [1, 2, 3, 4, 5, 6] and result.first is found[1] and result.first.later == 5
    assert (found[1].max_abs, found[1].first_index, found[1].differing, found[1].kernel) == (math.inf, (1,), 1, None)
    assert found[1].good_value == 1.0 and math.isnan(found[1].current_value)
    assert found[2].reason == "shape [2] -> [3]" and found[2].max_abs == math.inf and found[2].first_index is None
    assert found[3].reason == "dtype int32 -> float32" and found[4].reason == "dtype float32 -> float16"
    assert (found[5].first_index, found[5].good_value, found[5].current_value) == ((1,), False, True)
    assert (found[6].max_abs, found[6].max_rel, found[6].differing, found[6].numel) == (0.5, math.inf, 1, 2)
