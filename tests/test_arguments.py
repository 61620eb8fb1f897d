"""Wrong tensors never reach a kernel (issue 22 item 4): every entry point checks the caller's arguments
against the sidecar (count, dtype, shape, contiguity, device; issue 32 item 5: no Out/InOut tensor sharing
memory with another argument) before anything is built or run.

On real built directories with real g++: the L2 fixture declares `a: In fp32 [16]`, `out: Out fp32 [16]`;
the L3 one `a: In fp32 [2, 16]`, `out: Out fp32 [2, 16]`. "No kernel ran" is shown by outputs left as they
were, no `Replay finished`, no replay outputs kept and no executor loaded.
"""
from __future__ import annotations

import ctypes
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import copy_dir
from pypto_build.run.arguments import check_arguments, require_fit
from pypto_build.errors import ArgumentError, PyptoBuildError
from pypto_build.builddir.sidecars import ParamMeta, load_compiled_meta

torch = pytest.importorskip("torch")

SENTINEL = -7.0


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


def untouched(t: torch.Tensor) -> bool:
    return bool((t == SENTINEL).all())


def filled(*shape, dtype=torch.float32) -> torch.Tensor:
    return torch.full(shape, SENTINEL, dtype=dtype)


# -- the check itself (a pure function) ------------------------------------------------------------------
P = (ParamMeta("x", "In", (4, -1), "fp16"), ParamMeta("n", "In", None, "int32"),
     ParamMeta("q", "In", (2,), "fp8e4m3fn"), ParamMeta("y", "Out", (3,), "fp32"))


def args(**over):
    base = {"x": torch.zeros(4, 9, dtype=torch.float16), "n": 3, "q": torch.zeros(2), "y": torch.zeros(3)}
    base.update(over)
    return list(base.values())


def test_what_fits():
    assert check_arguments(P, args()) is None
    assert check_arguments(P, args(x=torch.zeros(4, 1, dtype=torch.float16))) is None     # -1: any size
    assert check_arguments(P, args(n=ctypes.c_int32(3))) is None                           # ctypes scalars
    assert check_arguments(P, args(n=2.5)) is None and check_arguments(P, args(n=True)) is None
    assert check_arguments(P, args(q=torch.zeros(2, dtype=torch.int8))) is None   # no torch dtype: shape only


@pytest.mark.parametrize("over,index,problem", [
    ({"x": torch.zeros(4, 9)}, 0, "is float32 [4, 9]"),
    ({"x": torch.zeros(5, 9, dtype=torch.float16)}, 0, "has shape [5, 9]"),
    ({"x": torch.zeros(4, 9, 1, dtype=torch.float16)}, 0, "has shape [4, 9, 1]"),
    ({"x": torch.zeros(9, 4, dtype=torch.float16).t()}, 0, "is not contiguous (strides (1, 4))"),
    ({"x": torch.zeros(4, 9, dtype=torch.float16, device="meta")}, 0, "is on meta"),
    ({"x": [0.0] * 36}, 0, "is a list, not a tensor"),
    ({"n": torch.zeros(1)}, 1, "is a tensor"),
    ({"n": None}, 1, "is None"),
    ({"n": "3"}, 1, "is a str"),
    ({"q": torch.zeros(3)}, 2, "has shape [3]"),
    ({"y": torch.zeros(16)}, 3, "has shape [16]"),
])
def test_the_first_misfit_names_its_parameter(over, index, problem):
    misfit = check_arguments(P, args(**over))
    assert (misfit.index, misfit.param, misfit.problem) == (index, P[index], problem)


def test_the_count():
    misfit = check_arguments(P, args()[:3])
    assert misfit.param is None and misfit.problem == "expected 4 arguments (x, n, q, y), got 3"
    assert check_arguments(P, [], outputs_optional=True).problem == \
        "expected 4 arguments (x, n, q, y) or 3 without the outputs, got 0"


def test_one_error_naming_the_file_the_parameter_what_was_declared_and_given(g):
    meta = load_compiled_meta(g / "compiled_meta.json")
    with pytest.raises(ArgumentError) as info:
        require_fit(meta, [torch.zeros(16, dtype=torch.float16), torch.zeros(16)])
    assert str(info.value) == (
        f"{g / 'compiled_meta.json'} declares argument 'a' (1 of 2) as In fp32 [16], but the one given is "
        "float16 [16]; pass a contiguous CPU float32 tensor of shape [16] (nothing ran)")
    assert isinstance(info.value, PyptoBuildError) and isinstance(info.value, TypeError) \
        and isinstance(info.value, ValueError)
    require_fit(None, [object()])           # no sidecar: nothing to hold them to


# -- aliasing: a written tensor shares memory with another argument (issue 32 item 5) ------------------------
A = (ParamMeta("x", "In", (8,), "fp32"), ParamMeta("y", "In", (8,), "fp32"), ParamMeta("n", "In", None, "int32"),
     ParamMeta("acc", "InOut", (8,), "fp32"), ParamMeta("o", "Out", (8,), "fp32"))


def test_inputs_may_alias_and_disjoint_views_of_one_buffer_fit():
    t, buf = torch.zeros(8), torch.zeros(40)
    assert check_arguments(A, [t, t, 1, torch.zeros(8), torch.zeros(8)]) is None              # In + In: read-only
    assert check_arguments(A, [buf[0:8], buf[0:8], 1, buf[8:16], buf[16:24]]) is None        # adjacent slices
    assert check_arguments(A, [t, t, 1, torch.zeros(8), buf[0:16].view(2, 8)[1]]) is None   # a view, alone
    empty = ParamMeta("e", "Out", (0,), "fp32")
    assert check_arguments((A[0], empty), [buf[0:8], buf[4:4]]) is None    # an empty tensor holds no byte


@pytest.mark.parametrize("given,index,other,problem", [
    (lambda t, buf: [t, torch.zeros(8), 1, torch.zeros(8), t], 4, 0, "are the same tensor"),      # In and Out
    (lambda t, buf: [buf[0:8], torch.zeros(8), 1, torch.zeros(8), buf[4:12]], 4, 0,
     "are overlapping views of one buffer"),
    (lambda t, buf: [torch.zeros(8), buf[7:15], 1, buf[0:8], torch.zeros(8)], 3, 1,               # InOut and In
     "are overlapping views of one buffer"),
    (lambda t, buf: [torch.zeros(8), torch.zeros(8), 1, buf[0:8], buf[7:15]], 3, 4,               # InOut and Out
     "are overlapping views of one buffer"),
    (lambda t, buf: [torch.zeros(8), torch.zeros(8), 1, t, t], 3, 4, "are the same tensor"),
])
def test_a_written_tensor_sharing_memory_is_a_misfit_of_both(given, index, other, problem):
    misfit = check_arguments(A, given(torch.zeros(8), torch.zeros(40)))
    assert (misfit.index, misfit.param, misfit.other, misfit.problem) == (index, A[index], other, problem)
    assert "pass distinct tensors" in misfit.fix and "InOut" in misfit.fix


def test_storage_shared_by_other_means_is_caught_by_its_bytes():
    np = pytest.importorskip("numpy")
    base = np.zeros(24, dtype=np.float32)
    x, o = torch.from_numpy(base[0:8]), torch.from_numpy(base[4:12])     # two storages, one memory
    misfit = check_arguments((A[0], A[4]), [x, o])
    assert (misfit.index, misfit.other, misfit.problem) == (1, 0, "overlap in memory")


def test_one_error_naming_both_parameters_and_the_fix(g):
    meta = load_compiled_meta(g / "compiled_meta.json")
    x = filled(16)
    with pytest.raises(ArgumentError) as info:
        require_fit(meta, [x, x])
    assert str(info.value) == (
        f"{g / 'compiled_meta.json'} declares argument 'out' (2 of 2) as Out fp32 [16] and 'a' (1 of 2) as In "
        "fp32 [16], but the tensors given for them are the same tensor; the program was compiled for distinct "
        "buffers (it would read what it already overwrote): pass distinct tensors (e.g. clone the one for 'a'); "
        "a program updates a tensor in place through one InOut parameter, given it once (nothing ran)")


def same_tensor() -> tuple[torch.Tensor, torch.Tensor]:
    x = filled(16)
    return x, x                         # replay(dir, x, x)


def overlapping_views() -> tuple[torch.Tensor, torch.Tensor]:
    buf = filled(24)
    return buf[0:16], buf[8:24]         # 8 floats shared


ALIASED = [pytest.param(same_tensor, "are the same tensor", id="same"),
           pytest.param(overlapping_views, "are overlapping views of one buffer", id="views")]
BOTH = (r"argument 'out' \(2 of 2\) as Out fp32 \[16\] and 'a' \(1 of 2\) as In fp32 \[16\], but the tensors "
        r"given for them ")


@pytest.mark.parametrize("make,problem", ALIASED)
def test_compiled_program_refuses_aliasing_before_running(g, make, problem):
    from pypto_build import CompiledProgram, benchmark

    prog = CompiledProgram.from_dir(g, platform="host")
    a, out = make()
    for call in (lambda: prog(a, out), lambda: benchmark(prog, [a, out], rounds=1, warmup=0)):
        with pytest.raises(ArgumentError, match=BOTH + problem + r"; .*pass distinct tensors.*InOut"):
            call()
    assert untouched(a) and untouched(out) and prog._executor is None       # nothing built, nothing ran


def test_compiled_program_runs_on_adjacent_slices_of_one_buffer(g):
    from pypto_build import CompiledProgram

    buf = filled(32)
    CompiledProgram.from_dir(g, platform="host")(buf[0:16], buf[16:32])
    assert untouched(buf[0:16]) and not untouched(buf[16:32])       # the input read, the output written


# -- CompiledProgram and benchmark(): the caller's own process ---------------------------------------------
def test_compiled_program_refuses_before_building_or_running(g):
    from pypto_build import CompiledProgram, benchmark

    prog = CompiledProgram.from_dir(g, platform="host")
    out = filled(16)
    with pytest.raises(ArgumentError, match=r"'a' \(1 of 2\) as In fp32 \[16\], but the one given is float16 \[16\]"):
        prog(torch.randn(16).half(), out)
    with pytest.raises(ArgumentError, match=r"expected 2 arguments \(a, out\) or 1 without the outputs, got 0"):
        prog()
    with pytest.raises(ArgumentError, match=r"'out' \(2 of 2\) as Out fp32 \[16\], but the one given is not "
                                            r"contiguous"):
        benchmark(prog, [torch.randn(16), filled(32)[::2]], rounds=1, warmup=0)
    assert untouched(out) and prog._executor is None and prog.platform == "host"   # nothing built, nothing ran
    prog(torch.randn(16), out)
    assert not untouched(out)                # the same program with fitting arguments runs


# A short output used to corrupt the caller's heap (`free(): invalid next size`, SIGABRT): in a child here,
# so that before the fix this test failed instead of killing the test run.
SHORT_OUTPUT = """
import sys, torch
from pypto_build import CompiledProgram, benchmark, ArgumentError
prog = CompiledProgram.from_dir(sys.argv[1], platform="host")
short = torch.full((4,), -7.0)
for call in (lambda: prog(torch.randn(16), short), lambda: benchmark(prog, [torch.randn(16), short], rounds=1)):
    try:
        call()
        print("RAN")
    except ArgumentError as exc:
        print("REFUSED", exc)
print("UNTOUCHED", bool((short == -7.0).all()))
"""


def test_a_short_output_never_reaches_the_kernel(g):
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SHORT_OUTPUT), str(g)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    expected = (f"REFUSED {g / 'compiled_meta.json'} declares argument 'out' (2 of 2) as Out fp32 [16], but the "
                "one given has shape [4]; pass a contiguous CPU float32 tensor of shape [16] (nothing ran)")
    assert lines == [expected, expected, "UNTOUCHED True"]


# -- replay(): before the build and the child -------------------------------------------------------------
@pytest.mark.parametrize("a,out,problem", [
    (torch.randn(16).half(), filled(16), r"'a' \(1 of 2\) as In fp32 \[16\], but the one given is float16"),
    (torch.randn(16), filled(4), r"'out' \(2 of 2\) as Out fp32 \[16\], but the one given has shape \[4\]"),
])
def test_replay_refuses_before_the_child_starts(g, capsys, a, out, problem):
    from pypto_build import replay

    with pytest.raises(ArgumentError, match=problem):
        replay(g, a, out)
    printed = capsys.readouterr().out
    assert "Replay finished" not in printed and "pypto-build:" not in printed      # no build, no run
    assert untouched(out) and not (g / ".pypto_build" / "replay").exists()


@pytest.mark.parametrize("validate", [False, True], ids=["run", "validate"])
@pytest.mark.parametrize("make,problem", ALIASED)
def test_replay_refuses_aliasing_before_the_child_starts(g, capsys, make, problem, validate):
    from pypto_build import replay

    a, out = make()
    with pytest.raises(ArgumentError, match=BOTH + problem):
        replay(g, a, out, validate=validate)
    printed = capsys.readouterr().out
    assert "Replay finished" not in printed and "pypto-build:" not in printed      # no build, no run
    assert untouched(a) and untouched(out) and not (g / ".pypto_build" / "replay").exists()


# -- DistributedCompiledProgram ---------------------------------------------------------------------------
@pytest.mark.slow
def test_distributed_program_refuses_before_any_rank_runs(built_l3, tmp_path):
    from pypto_build import DistributedCompiledProgram

    l3 = copy_dir(built_l3, tmp_path / "l3")
    prog = DistributedCompiledProgram.from_dir(l3, platform="host")
    out = filled(2, 16, dtype=torch.float64)
    with pytest.raises(ArgumentError, match=r"distributed_meta\.json declares argument 'out' \(2 of 2\) as Out "
                                            r"fp32 \[2, 16\], but the one given is float64 \[2, 16\]"):
        prog(torch.randn(2, 16), out)
    with pytest.raises(ArgumentError, match=r"expected 2 arguments \(a, out\), got 1"):
        prog(torch.randn(2, 16))
    with pytest.raises(ArgumentError, match=r"'out' \(2 of 2\) as Out fp32 \[2, 16\] and 'a' \(1 of 2\) as In "
                                            r"fp32 \[2, 16\], but the tensors given for them are the same tensor"):
        prog(good := filled(2, 16), good)
    assert untouched(out) and untouched(good) and not (l3 / "dfx_outputs").exists()
    prog(torch.randn(2, 16), good)
    assert not untouched(good)


def test_golden_inputs_are_held_to_the_same_check(g):
    from pypto_build import validate

    golden = g / "golden.py"
    golden.write_text(golden.read_text().replace('("a", a),', '("a", torch.randn((32,))[::2]),'))
    with pytest.raises(PyptoBuildError, match=r"golden\.py: input 'a' is not contiguous \(strides \(2,\)\), "
                                              r"but compiled_meta\.json declares 'a' as fp32 \[16\]; fix golden\.py"):
        validate(g)


def test_the_runs_child_raises_the_error_trees_own_class(g):
    """Issue 34 item 1: an error crosses the run's child process as the class the in-process run raises (here
    the sidecar's MetaError for a compiled_meta.json broken after the build, a ValueError), not a string
    rebuilt as a broader class."""
    from pypto_build.builddir.layout import BuildKind
    from pypto_build.errors import MetaError
    from pypto_build.plan.program import Program
    from pypto_build.run import run_built

    (g / "compiled_meta.json").write_text("{")
    with pytest.raises(MetaError, match=r"compiled_meta\.json") as info:
        run_built(Program(g, BuildKind.L2, "host"), validate=True, say=lambda _line: None)
    assert isinstance(info.value, ValueError)


def test_golden_inputs_may_not_alias_a_written_one(g):
    from pypto_build import validate

    golden = g / "golden.py"
    golden.write_text(golden.read_text().replace('("out", out),', '("out", a),'))
    with pytest.raises(PyptoBuildError, match=r"golden\.py: inputs 'out' and 'a' are the same tensor, but "
                                              r"compiled_meta\.json declares 'out' as Out and 'a' as In; fix "
                                              r"golden\.py \(.*pass distinct tensors"):
        validate(g)
