"""The hand-written example `pypto_build/examples/matmul_relu/` (real layout, ptoas/ stage, golden.py)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import FAKE_PTOAS

import pypto_build
from pypto_build.run.golden import load_golden
from pypto_build.manifest import read_kernel_config
from pypto_build.markers import host_binary
from pypto_build.sidecars import load_compiled_meta
from pypto_build.pto.splice import function_names, preprocess, splice, split

EXAMPLE = Path(pypto_build.__file__).resolve().parent / "examples" / "matmul_relu"
KERNELS = {"matmul_relu_incore_0_aic": "aic", "matmul_relu_incore_1_aiv": "aiv"}


def _assert_no_build_products(root: Path) -> None:
    products = [p for p in root.rglob("*") if p.suffix in (".so", ".o", ".bin")
                or p.name in ("cache", ".pypto_build", "__pycache__", "dfx_outputs")]
    assert not products, f"build products in the package copy: {products}"


def _raw_after_pto(root: Path) -> None:
    """Make each raw `ptoas/<unit>.cpp` at least as new as its `.pto`, as ir.compile() leaves them.

    The package copy is written that way, but git does not keep mtimes: a checkout writes
    `<unit>.cpp` before `<unit>.pto` (index order), so the raw output can end up older.
    """
    for pto in (root / "ptoas").glob("*.pto"):
        raw = pto.with_suffix(".cpp")
        when = max(os.stat(raw).st_mtime_ns, os.stat(pto).st_mtime_ns)
        os.utime(raw, ns=(when, when))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, pypto_build.BuildResult]:
    root = tmp_path_factory.mktemp("example") / "matmul_relu"
    shutil.copytree(EXAMPLE, root)
    _raw_after_pto(root)
    result = pypto_build.build(root)        # the raw ptoas output is adopted: ptoas never runs
    return root, result


def test_package_copy_holds_sources_only():
    _assert_no_build_products(EXAMPLE)
    files = sorted(p.relative_to(EXAMPLE).as_posix() for p in EXAMPLE.rglob("*") if p.is_file())
    assert files == [
        "compiled_meta.json",
        "golden.py",
        "kernel_config.py",
        "kernels/aic/matmul_relu_incore_0_aic.cpp",
        "kernels/aiv/matmul_relu_incore_1_aiv.cpp",
        "orchestration/matmul_relu.cpp",
        "ptoas/matmul_relu_incore_0_aic.cpp",
        "ptoas/matmul_relu_incore_0_aic.pto",
        "ptoas/matmul_relu_incore_1_aiv.cpp",
        "ptoas/matmul_relu_incore_1_aiv.pto",
    ]
    for name in KERNELS:
        assert "NOT real PTO-IR" in (EXAMPLE / "ptoas" / f"{name}.pto").read_text(encoding="utf-8")


def test_build_compiles_two_kernels_and_the_orchestration(built):
    root, result = built
    assert result.ok and not result.failures
    assert result.compiled == ["compile:aic/matmul_relu_incore_0_aic", "compile:aiv/matmul_relu_incore_1_aiv",
                               "orch:matmul_relu"]
    assert result.spliced == () and result.not_applied == ()
    for name, core in KERNELS.items():
        assert (root / host_binary(f"kernels/{core}/{name}.cpp")).is_file()
    assert (root / host_binary("orchestration/matmul_relu.cpp")).is_file()
    # Adopting the ptoas stage left every source byte-identical to the package copy.
    for src in EXAMPLE.rglob("*"):
        if src.is_file():
            assert (root / src.relative_to(EXAMPLE)).read_bytes() == src.read_bytes(), src.name
    _assert_no_build_products(EXAMPLE)
    again = pypto_build.build(root)
    assert again.compiled == []


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_body_is_the_preprocessed_ptoas_output(name):
    core = KERNELS[name]
    kernel = (EXAMPLE / "kernels" / core / f"{name}.cpp").read_text(encoding="utf-8")
    raw = (EXAMPLE / "ptoas" / f"{name}.cpp").read_text(encoding="utf-8")
    assert function_names(raw) == [name]
    body = preprocess(raw)
    head, old_body, tail = split(kernel, name)
    assert old_body == body
    assert splice(kernel, body, name) == kernel                   # byte-exact round trip
    assert head + "\n" + body + "\n" + tail == kernel
    guard = "__DAV_CUBE__" if core == "aic" else "__DAV_VEC__"
    assert f"static __aicore__ void {name}(" in body and f"#if defined({guard})" in body
    assert 'extern "C" __aicore__ __attribute__((always_inline)) void kernel_entry(__gm__ int64_t* args)' in tail


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_raw_output_is_what_the_ptoas_stand_in_emits(name, tmp_path):
    import subprocess
    import sys

    out = tmp_path / f"{name}.cpp"
    subprocess.run([sys.executable, str(FAKE_PTOAS), str(EXAMPLE / "ptoas" / f"{name}.pto"), "-o", str(out),
                    "--enable-insert-sync", "--pto-level=level2"], check=True)
    assert out.read_bytes() == (EXAMPLE / "ptoas" / f"{name}.cpp").read_bytes()


def test_kernel_config_and_compiled_meta():
    cfg = read_kernel_config(EXAMPLE / "kernel_config.py")
    assert cfg.runtime_name == "tensormap_and_ringbuffer"
    assert cfg.orchestration.source == "orchestration/matmul_relu.cpp"
    assert cfg.orchestration.function_name == "aicpu_orchestration_entry"
    assert cfg.orchestration.signature == ("IN", "IN", "IN", "OUT")
    assert [(k.func_id, k.name, k.core_type, k.signature) for k in cfg.kernels] == [
        (0, "matmul_relu_incore_0_aic", "aic", ("IN", "IN", "OUT")),
        (1, "matmul_relu_incore_1_aiv", "aiv", ("IN", "IN", "OUT")),
    ]
    assert "\n\t\"runtime\": " in (EXAMPLE / "kernel_config.py").read_text(encoding="utf-8")   # TAB indentation

    meta = load_compiled_meta(EXAMPLE / "compiled_meta.json")
    assert meta.schema == 1 and meta.num_return_types == 1
    assert (meta.platform, meta.backend_type) == ("a2a3sim", "Ascend910B")
    assert [(p.name, p.direction, p.shape, p.dtype) for p in meta.params] == [
        ("a", "In", (16, 32), "fp32"), ("b", "In", (32, 16), "fp32"), ("bias", "In", (16,), "fp32"),
        ("out", "Out", (16, 16), "fp32"),
    ]
    assert meta.output_indices == (3,)


def test_golden_clips_some_values():
    torch = pytest.importorskip("torch")
    golden = load_golden(EXAMPLE)
    named = dict(golden.inputs())
    assert list(named) == ["a", "b", "bias", "out"] and golden.outputs == ["out"]
    pre = named["a"] @ named["b"] + named["bias"]
    assert 0 < int((pre < 0).sum()) < pre.numel()          # the ReLU clips some values, not all
    expected = golden.expected(named)["out"]
    assert torch.equal(expected, torch.relu(pre))
    assert not named["out"].any()                            # compute_golden worked on a clone


@pytest.mark.slow
def test_runs_on_the_host_and_matches_golden(built):
    executor = pytest.importorskip("pypto_build.runtime.executor")
    import torch

    root, _result = built
    golden = load_golden(root)
    pairs = golden.inputs()
    names, args = [n for n, _ in pairs], [v for _, v in pairs]
    with executor.HostExecutor(root) as ex:
        ex.run(args, param_names=names)
    named = dict(pairs)
    expected = golden.expected(named)
    torch.testing.assert_close(named["out"], expected["out"], rtol=golden.rtol, atol=golden.atol)
    assert (named["out"] == 0).any() and (named["out"] > 0).any()
