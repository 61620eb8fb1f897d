"""The host runtime executor: real build directories, built by pypto_build, run on the CPU."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import copy_dir  # noqa: E402
from pypto_build.testing import synth  # noqa: E402
from pypto_build.api import build  # noqa: E402
from pypto_build.platforms.host.places import host_binary, host_external_binary  # noqa: E402
from pypto_build.platforms.host.runtime import abi, capture, dfx  # noqa: E402
from pypto_build.platforms.host.runtime.executor import ExecutorError, HostExecutor, RunTrace  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="no g++: nothing can be built")
KERNELS = 4


@pytest.fixture(scope="session")
def built_run(tmp_path_factory) -> Path:
    """A 4-kernel L2 dir with golden.py, built once."""
    root = synth.write_l2(tmp_path_factory.mktemp("exec") / "l2", kernels=KERNELS, golden=True, size=16)
    build(root)
    return root


@pytest.fixture(scope="session")
def built_inter(tmp_path_factory) -> Path:
    """The same program with a runtime-allocated intermediate, built once."""
    root = synth.write_l2(tmp_path_factory.mktemp("exec_i") / "l2", kernels=KERNELS, golden=True, size=16,
                          intermediate=True)
    build(root)
    return root


@pytest.fixture
def run_dir(built_run, tmp_path) -> Path:
    """A private, already built copy (for tests that edit or delete files)."""
    return copy_dir(built_run, tmp_path / "l2")


def golden(root: Path):
    spec = importlib.util.spec_from_file_location(f"golden_{abs(hash(root))}", root / "golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs_and_expected(root: Path) -> tuple[list, dict, object]:
    """(generate_inputs() list, expected tensors after compute_golden, golden module)."""
    g = golden(root)
    inputs = list(g.generate_inputs({"name": "Default"}))
    expected = {name: value.clone() for name, value in inputs}
    g.compute_golden(expected, {})
    return inputs, expected, g


def run_program(root: Path, inputs: list, **kw) -> RunTrace:
    with HostExecutor(root, **kw) as ex:
        return ex.run([v for _, v in inputs], param_names=[n for n, _ in inputs], trace=True)


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", ["built_run", "built_inter"])
def test_output_equals_golden(fixture, request):
    root = request.getfixturevalue(fixture)
    inputs, expected, g = inputs_and_expected(root)
    a_before = dict(inputs)["a"].clone()
    run_program(root, inputs)
    got = dict(inputs)
    for name in g.__outputs__:
        torch.testing.assert_close(got[name], expected[name], rtol=g.RTOL, atol=g.ATOL)
    assert torch.equal(got["a"], a_before), "inputs are left alone"
    assert got["out"].abs().sum() > 0


def test_outputs_are_written_in_place(built_run):
    inputs, expected, _ = inputs_and_expected(built_run)
    out = dict(inputs)["out"]
    ptr = out.data_ptr()
    with HostExecutor(built_run) as ex:
        ex.run([v for _, v in inputs])
        assert out.data_ptr() == ptr
        torch.testing.assert_close(out, expected["out"])
        # a second run on the same executor gives the same result
        out.zero_()
        ex.run([v for _, v in inputs])
    torch.testing.assert_close(out, expected["out"])


@pytest.mark.parametrize("fixture, func_ids", [("built_run", [0, 1, 2, 3]), ("built_inter", [0, 0, 1, 2, 3])])
def test_trace_is_in_submission_order(fixture, func_ids, request):
    inputs, _, _ = inputs_and_expected(request.getfixturevalue(fixture))
    trace = run_program(request.getfixturevalue(fixture), inputs)
    assert [t.index for t in trace.tasks] == list(range(len(func_ids)))
    assert [t.func_id for t in trace.tasks] == func_ids
    assert [t.kernel for t in trace.tasks] == [synth.kernel_name("main", f) for f in func_ids]
    assert [t.core_type for t in trace.tasks] == [synth.core_type(f) for f in func_ids]
    orch_start, orch_end = trace.orchestration_ns
    times = [orch_start] + [x for t in trace.tasks for x in (t.start_ns, t.end_ns)] + [orch_end]
    assert times == sorted(times), "tasks ran one after another, inside the orchestration"


def test_trace_names_arguments_and_intermediates(built_inter):
    inputs, _, _ = inputs_and_expected(built_inter)
    trace = run_program(built_inter, inputs)
    first, second, third = trace.tasks[:3]

    def brief(args):
        return [(a.kind, a.name, a.dtype, a.shape, a.role) if a.kind == "tensor" else (a.kind, a.value) for a in args]

    assert brief(first.args) == [("tensor", "a", "FLOAT32", (16,), "input"),
                                 ("tensor", "intermediate#0", "FLOAT32", (16,), "output"), ("scalar", 16)]
    assert brief(second.args[:2]) == [("tensor", "intermediate#0", "FLOAT32", (16,), "input"),
                                      ("tensor", "out", "FLOAT32", (16,), "output")]
    assert brief(third.args)[1] == ("tensor", "out", "FLOAT32", (16,), "inout")


def test_without_trace_args_are_not_described(built_run):
    inputs, _, _ = inputs_and_expected(built_run)
    with HostExecutor(built_run) as ex:
        trace = ex.run([v for _, v in inputs])
    assert len(trace.tasks) == KERNELS and all(t.args == [] for t in trace.tasks)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_deleted_kernel_binary_is_named(run_dir):
    so = run_dir / host_binary(synth.kernel_path(run_dir, 2).relative_to(run_dir).as_posix())
    so.unlink()
    with pytest.raises(ExecutorError) as info:
        HostExecutor(run_dir)
    msg = str(info.value)
    assert str(so) in msg and "func_id 2" in msg and "build" in msg


def test_missing_orchestration_binary_is_named(run_dir):
    (run_dir / host_binary("orchestration/main.cpp")).unlink()
    with pytest.raises(ExecutorError, match=r"orchestration: .*main\.so does not exist; build"):
        HostExecutor(run_dir)


def test_wrong_arg_count_names_both_counts(built_run):
    inputs, _, _ = inputs_and_expected(built_run)
    with HostExecutor(built_run) as ex:
        with pytest.raises(ExecutorError) as info:
            ex.run([inputs[0][1]])
    assert "expects 2 arguments" in str(info.value) and "1 were given" in str(info.value)


def test_non_contiguous_tensor_is_refused(built_run):
    a = torch.randn(16)
    out = torch.zeros(32)[::2]
    with HostExecutor(built_run) as ex:
        with pytest.raises(ExecutorError, match=r"argument 'out'.*not contiguous"):
            ex.run([a, out], param_names=["a", "out"])
    assert out.abs().sum() == 0


def test_unsupported_dtype_is_refused(built_run):
    with HostExecutor(built_run) as ex:
        with pytest.raises(ExecutorError, match="not supported on the host runtime"):
            ex.run([torch.zeros(16, dtype=torch.complex64), torch.zeros(16)])
    with pytest.raises(abi.UnsupportedDType, match="FP8E4M3FN is not supported on the host runtime"):
        abi.torch_dtype(abi.DataType.FP8E4M3FN)


def test_closed_executor_refuses_to_run(built_run):
    ex = HostExecutor(built_run)
    ex.close()
    ex.close()  # idempotent
    with pytest.raises(ExecutorError, match="closed"):
        ex.run([torch.zeros(16), torch.zeros(16)])


def _edit_orchestration(root: Path, before: str, after: str) -> None:
    orch = root / "orchestration" / "main.cpp"
    text = orch.read_text()
    assert before in text
    orch.write_text(text.replace(before, after, 1))
    build(root)


def test_logs_fatal_reports_and_unknown_func_id(run_dir):
    _edit_orchestration(run_dir, "    PTO2_SCOPE() {",
                        '    LOG_INFO("n=%lld", (long long)n);\n    PTO2_SCOPE() {\n'
                        "        { CoreTaskArgs bad; bad.add_input(ext_a); rt_submit_aiv_task(99, bad); }")
    inputs, _, _ = inputs_and_expected(run_dir)
    lines: list[tuple[str, str]] = []
    with HostExecutor(run_dir, log=lambda level, text: lines.append((level, text))) as ex:
        with pytest.raises(ExecutorError) as info:
            ex.run([v for _, v in inputs])
    assert [line for line in lines if line[0] != "debug"] == [("info", "aicpu_orchestration_entry: n=16")]
    assert "func_id 99" in str(info.value) and "does not list" in str(info.value)
    assert dict(inputs)["out"].abs().sum() == 0, "nothing was submitted after the failure"


def test_log_level_debug_adds_the_runtimes_own_lines(built_inter):
    """--log-level debug: each tensor staged and each task dispatched, as `[debug] host runtime: ...` lines."""
    from pypto_build.builddir.runconfig import RunConfig
    from pypto_build.platforms.host.run import HostRunner

    inputs, _, _ = inputs_and_expected(built_inter)
    said: dict[str, list[str]] = {}
    for level in ("debug", "warn"):
        said[level] = []
        HostRunner("host").run_l2(built_inter, [v for _, v in inputs], RunConfig(log_level=level),
                            names=[n for n, _ in inputs], say=said[level].append)
    debug = [line for line in said["debug"] if line.startswith("[debug] host runtime: ")]
    assert any(line.startswith("[debug] host runtime: staged tensor a: ") for line in debug)
    assert any(line.startswith("[debug] host runtime: staged intermediate#0: ") for line in debug)
    dispatched = [line for line in debug if line.startswith("[debug] host runtime: dispatch task ")]
    assert len(dispatched) >= KERNELS and dispatched[0].startswith("[debug] host runtime: dispatch task 0 (")
    assert not any("[debug]" in line for line in said["warn"]), "the default level shows none of them"


def test_orchestration_fatal_report_fails_the_run(run_dir):
    _edit_orchestration(run_dir, "    PTO2_SCOPE() {", '    rt_report_fatal(7, "boom %d", 3);\n    PTO2_SCOPE() {')
    inputs, _, _ = inputs_and_expected(run_dir)
    with HostExecutor(run_dir) as ex:
        with pytest.raises(ExecutorError, match=r"fatal error \(code 7\) in aicpu_orchestration_entry: boom 3"):
            ex.run([v for _, v in inputs])
        # the executor stays usable: the fatal state belongs to one run
        with pytest.raises(ExecutorError, match="boom 3"):
            ex.run([v for _, v in inputs])


def test_exception_in_a_callback_does_not_escape_into_c(run_dir):
    _edit_orchestration(run_dir, "    PTO2_SCOPE() {", '    LOG_WARN("hello");\n    PTO2_SCOPE() {')
    inputs, _, _ = inputs_and_expected(run_dir)

    def bad_log(level: str, text: str) -> None:
        raise ZeroDivisionError("log sink broke")

    with HostExecutor(run_dir, log=bad_log) as ex:
        with pytest.raises(ExecutorError, match="log: internal error: ZeroDivisionError: log sink broke") as info:
            ex.run([v for _, v in inputs])
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    assert dict(inputs)["out"].abs().sum() == 0


# ---------------------------------------------------------------------------
# Reloading after a rebuild, external kernels
# ---------------------------------------------------------------------------


def test_rebuilt_kernel_is_reloaded_in_the_same_process(run_dir):
    inputs, expected, _ = inputs_and_expected(run_dir)
    old = HostExecutor(run_dir)
    old.run([v for _, v in inputs])
    torch.testing.assert_close(dict(inputs)["out"], expected["out"])

    k0 = synth.kernel_path(run_dir, 0)
    k0.write_text(k0.read_text().replace("synth_scale(a[i], 1.0f)", "synth_scale(a[i], 3.0f)"))
    assert build(run_dir).compiled, "the edited kernel was recompiled"

    a = dict(inputs)["a"]
    want = a * 3.0
    for func_id in range(1, KERNELS):
        want = want * 0.5 + a * float(func_id + 1)
    out = torch.zeros(16)
    with HostExecutor(run_dir) as new:
        new.run([a, out])
    torch.testing.assert_close(out, want)
    assert not torch.allclose(out, expected["out"])
    # the executor created before the rebuild keeps its own copy of the old binary
    old_out = torch.zeros(16)
    old.run([a, old_out])
    old.close()
    torch.testing.assert_close(old_out, expected["out"])


def test_external_kernel_is_loaded_from_cache_external(run_dir, tmp_path):
    ext = tmp_path / "ext" / "my_kernel.cpp"
    ext.parent.mkdir()
    shutil.copy(synth.kernel_path(run_dir, 3), ext)
    cfg = run_dir / "kernel_config.py"
    old = 'str(_ROOT_DIR / "kernels" / "aiv" / "main_incore_3_aiv.cpp")'
    cfg.write_text(cfg.read_text().replace(old, f"{str(ext)!r}, \"external\": True"))
    build(run_dir)
    assert (run_dir / host_external_binary(3, "aiv", "my_kernel")).is_file()
    (run_dir / host_binary(synth.kernel_path(run_dir, 3).relative_to(run_dir).as_posix())).unlink()  # not used any more
    inputs, expected, _ = inputs_and_expected(run_dir)
    trace = run_program(run_dir, inputs)
    torch.testing.assert_close(dict(inputs)["out"], expected["out"])
    assert trace.tasks[-1].func_id == 3


# ---------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------


def test_swimlane_has_one_event_per_task(built_inter, tmp_path):
    inputs, _, _ = inputs_and_expected(built_inter)
    trace = run_program(built_inter, inputs)
    path = tmp_path / "dfx" / "swimlane.json"
    dfx.write_swimlane(trace, path)
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ns"
    tasks = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in ("aic", "aiv")]
    assert len(tasks) == len(trace.tasks) == 5
    assert [e["name"] for e in tasks] == [t.kernel for t in trace.tasks]
    assert [e["tid"] for e in tasks] == [0 if t.core_type == "aic" else 1 for t in trace.tasks]
    ts = [e["ts"] for e in tasks]
    assert ts == sorted(ts) and len(set(ts)) == len(ts) and ts[0] >= 0
    assert all(isinstance(e["dur"], float) and e["dur"] >= 0 and e["pid"] == 0 for e in tasks)
    orch = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "orchestration"]
    assert len(orch) == 1 and orch[0]["ts"] == 0.0
    assert ts[-1] + tasks[-1]["dur"] <= orch[0]["dur"]


def test_args_dump_is_simplers_manifest_with_the_tensors(built_inter, tmp_path):
    """Level 2: simpler's manifest (its counters and record fields, its dtype names, its order: task_id, stage,
    arg_index) and an args.bin whose slices are each tensor as the kernel saw it (inputs before it ran, outputs
    after it returned)."""
    inputs, expected, _ = inputs_and_expected(built_inter)
    with HostExecutor(built_inter) as ex:
        trace = ex.run([v for _, v in inputs], param_names=[n for n, _ in inputs], payloads=True)
    path = dfx.write_args_dump(trace, tmp_path / "dump", 2)
    assert path == tmp_path / "dump" / "args_dump.json"
    doc = json.loads(path.read_text())
    blob = (tmp_path / "dump" / "args.bin").read_bytes()
    records = doc["args"]
    assert {k: doc[k] for k in ("dump_args_level", "bin_file", "truncated_args", "dropped_records",
                                "dropped_overwrite", "run_dir")} == \
        {"dump_args_level": 2, "bin_file": "args.bin", "truncated_args": 0, "dropped_records": 0,
         "dropped_overwrite": 0, "run_dir": "args_dump"}
    # 5 tasks, each: a tensor input, a scalar, a tensor output (2 tasks) or inout (3 tasks: at both stages)
    assert doc["total_args"] == len(records) == 5 * 3 + 3
    assert (doc["before_dispatch"], doc["after_completion"]) == (5 * 2 + 3, 5)
    assert (doc["input_args"], doc["output_args"], doc["inout_args"]) == (10, 2, 6)
    assert [r["task_id"] for r in records] == sorted(r["task_id"] for r in records)
    first = [r for r in records if r["task_id"] == "0x0000000000000000"]
    assert [(r["arg_index"], r["role"], r["stage"], r["kind"]) for r in first] == \
        [(0, "input", "before_dispatch", "tensor"), (2, "input", "before_dispatch", "scalar"),
         (1, "output", "after_completion", "tensor")]
    assert first[0]["dtype"] == "FLOAT32" and first[0]["shape"] == [16] and first[0]["strides"] == [1]
    assert first[1] == {**first[1], "dtype": "UINT64", "value": 16, "bin_size": 0, "shape": []}
    assert first[2]["name"] == "intermediate#0" and records[-1]["name"] == "out"
    assert all(r["func_id"] == [t.func_id] for t in trace.tasks for r in records
               if r["task_id"] == f"0x{t.index:016x}")

    def payload(record):
        return torch.frombuffer(bytearray(blob[record["bin_offset"]:record["bin_offset"] + record["bin_size"]]),
                                dtype=torch.float32)

    a = dict(inputs)["a"]
    for record in records:
        if record["kind"] == "tensor" and record["name"] == "a":
            torch.testing.assert_close(payload(record), a, rtol=0, atol=0)
    last_out = [r for r in records if r["name"] == "out" and r["stage"] == "after_completion"][-1]
    torch.testing.assert_close(payload(last_out), expected["out"], rtol=0, atol=0)
    # an inout's two snapshots differ: the kernel's update is between them
    before, after = [r for r in records if r["task_id"] == "0x0000000000000002" and r["arg_index"] == 1]
    assert before["stage"] == "before_dispatch" and not torch.equal(payload(before), payload(after))
    assert sum(r["bin_size"] for r in records) == len(blob)


def test_args_dump_levels_1_and_3_without_marks(built_inter, tmp_path):
    """Level 3: every record, no payload (bin_file null, no args.bin); level 1: nothing (the host runtime has no
    dump() marks, and simpler exports nothing without them). Payloads are copied only when asked."""
    inputs, _, _ = inputs_and_expected(built_inter)
    trace = run_program(built_inter, inputs)
    assert all(a.before is None and a.after is None for t in trace.tasks for a in t.args)
    assert dfx.write_args_dump(trace, tmp_path / "one", 1) is None and not (tmp_path / "one").exists()
    doc = json.loads(dfx.write_args_dump(trace, tmp_path / "three", 3).read_text())
    assert doc["bin_file"] is None and doc["dump_args_level"] == 3 and len(doc["args"]) == 5 * 3 + 3
    assert all(r["bin_size"] == 0 for r in doc["args"]) and not (tmp_path / "three" / "args.bin").exists()


# ---------------------------------------------------------------------------
# abi helpers
# ---------------------------------------------------------------------------


def test_chip_tensor_from_torch():
    t = torch.zeros((2, 3, 4), dtype=torch.bfloat16)
    recs, _raw = abi.aligned_tensors(1)
    assert ctypes.addressof(recs) % 64 == 0
    abi.fill_from_torch(recs[0], t)
    rec = recs[0]
    assert (rec.addr, rec.size, rec.start_offset, rec.ndims) == (t.data_ptr(), 48, 0, 3)
    assert abi.shape_of(rec) == (2, 3, 4) and list(rec.strides)[:3] == [12, 4, 1]
    assert rec.dtype == abi.DataType.BFLOAT16 and rec.is_contiguous == 1 and rec.owner_task_id == 2**64 - 1
    assert abi.describe(rec) == "bfloat16[2, 3, 4]"
    for code in range(12):
        assert abi.dtype_of_torch(abi.torch_dtype(code)) == code


def test_view_bytes_are_the_logical_view_gathered_row_major():
    """What a dump copies of a record (simpler's `logical_contiguous` payload): a row-major view's bytes at its
    start_offset, and a strided view's elements gathered in row-major order."""
    base = torch.arange(60, dtype=torch.int16).reshape(5, 12)
    recs, _raw = abi.aligned_tensors(1)
    abi.fill_from_torch(recs[0], base)
    rec = recs[0]
    assert capture.view_bytes(rec) == base.numpy().tobytes()
    rec.start_offset, rec.ndims, rec.shapes[0], rec.strides[0] = 14, 1, 5, 1      # base[1, 2:7]
    assert capture.view_bytes(rec) == base[1, 2:7].numpy().tobytes()
    rec.ndims, rec.start_offset = 2, 2
    rec.shapes[0], rec.shapes[1], rec.strides[0], rec.strides[1] = 3, 2, 1, 12    # base[:2, 2:5].T
    assert not capture.row_major((3, 2), (1, 12))
    assert capture.view_bytes(rec) == base[:2, 2:5].T.contiguous().numpy().tobytes()
    assert (abi.dump_dtype(rec.dtype), abi.element_size(rec.dtype), abi.dump_dtype(99)) == ("INT16", 2, "UNKNOWN")


def test_scalar_bits():
    assert abi.scalar_bits(True) == 1 and abi.scalar_bits(-1) == 2**64 - 1 and abi.scalar_bits(7) == 7
    assert abi.scalar_bits(1.5) == 0x3FC00000  # Python float: float32 bits, zero-extended
    assert abi.scalar_bits(ctypes.c_float(1.5)) == 0x3FC00000
    assert abi.scalar_bits(ctypes.c_double(2.5)) == 0x4004000000000000
    assert abi.scalar_bits(ctypes.c_int32(-2)) == 2**64 - 2  # sign-extended, like add_scalar
    assert abi.scalar_bits(ctypes.c_uint32(0xFFFFFFFF)) == 0xFFFFFFFF
    with pytest.raises(ValueError):
        abi.scalar_bits(2**64)
    with pytest.raises(ValueError, match="c_double"):
        abi.scalar_bits(1e300)
    with pytest.raises(TypeError):
        abi.scalar_bits("3")
