"""The hand-written example `pypto_build/examples/matmul_relu/` (real layout, golden.py), its `.pto` stage
`matmul_relu_ptoas/` (for `pypto-build example --pto`), and `pypto-build example` with any ptoas installed."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FAKE_PTOAS, inject

import pypto_build
from pypto_build.run.golden import load_golden
from pypto_build.builddir.manifest import read_kernel_config
from pypto_build.platforms.host.places import host_binary
from pypto_build.builddir.sidecars import load_compiled_meta
from pypto_build.pto.splice import function_names, preprocess, splice, split
from pypto_build.testing.fake_ptoas import make_fake_ptoas

EXAMPLE = Path(pypto_build.__file__).resolve().parent / "examples" / "matmul_relu"
PTO_STAGE = EXAMPLE.parent / "matmul_relu_ptoas"          # laid over a copy by `pypto-build example --pto`
KERNELS = {"matmul_relu_incore_0_aic": "aic", "matmul_relu_incore_1_aiv": "aiv"}


def _sources(root: Path) -> list[Path]:
    """The files of a package example (pip byte-compiles its .py files on install: `__pycache__` is not one)."""
    return [p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def _assert_no_build_products(root: Path) -> None:
    products = [p for p in root.rglob("*") if p.suffix in (".so", ".o", ".bin")
                or p.name in ("cache", ".pypto_build", "dfx_outputs")]
    assert not products, f"build products in the package copy: {products}"


def test_a_copy_leaves_the_packages_bytecode_behind(tmp_path, monkeypatch):
    """A package installed by pip (or after any import of its examples) holds `__pycache__` beside golden.py:
    the copy and the list of the example's files leave it out."""
    from pypto_build.cli import example

    package = tmp_path / "examples"
    shutil.copytree(EXAMPLE.parent, package)
    for folder in ("matmul_relu", "matmul_relu_ptoas"):
        (package / folder / "__pycache__").mkdir(exist_ok=True)
        (package / folder / "__pycache__" / "golden.cpython-311.pyc").write_bytes(b"\x00")
    monkeypatch.setattr(example, "EXAMPLES", package)
    dest = tmp_path / "copy"
    example._copy(example.WITH_PTO, dest)
    assert not list(dest.rglob("__pycache__"))
    assert "__pycache__" not in " ".join(example.WITH_PTO.files())


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, pypto_build.BuildResult]:
    root = tmp_path_factory.mktemp("example") / "matmul_relu"
    shutil.copytree(EXAMPLE, root)
    result = pypto_build.build(root)        # no ptoas/ stage: ptoas plays no part, whatever is installed
    return root, result


def test_package_copy_holds_sources_only():
    _assert_no_build_products(EXAMPLE)
    _assert_no_build_products(PTO_STAGE)
    files = sorted(p.relative_to(EXAMPLE).as_posix() for p in _sources(EXAMPLE))
    assert files == [
        "compiled_meta.json",
        "golden.py",
        "kernel_config.py",
        "kernels/aic/matmul_relu_incore_0_aic.cpp",
        "kernels/aiv/matmul_relu_incore_1_aiv.cpp",
        "orchestration/matmul_relu.cpp",
    ]
    assert sorted(p.relative_to(PTO_STAGE).as_posix() for p in _sources(PTO_STAGE)) == [
        "ptoas/matmul_relu_incore_0_aic.cpp",
        "ptoas/matmul_relu_incore_0_aic.pto",
        "ptoas/matmul_relu_incore_1_aiv.cpp",
        "ptoas/matmul_relu_incore_1_aiv.pto",
    ]
    for name in KERNELS:
        assert "NOT real PTO-IR" in (PTO_STAGE / "ptoas" / f"{name}.pto").read_text(encoding="utf-8")


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
    for src in _sources(EXAMPLE):
        assert (root / src.relative_to(EXAMPLE)).read_bytes() == src.read_bytes(), src.name
    _assert_no_build_products(EXAMPLE)
    again = pypto_build.build(root)
    assert again.compiled == []


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_body_is_the_preprocessed_ptoas_output(name):
    core = KERNELS[name]
    kernel = (EXAMPLE / "kernels" / core / f"{name}.cpp").read_text(encoding="utf-8")
    raw = (PTO_STAGE / "ptoas" / f"{name}.cpp").read_text(encoding="utf-8")
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
    out = tmp_path / f"{name}.cpp"
    subprocess.run([sys.executable, str(FAKE_PTOAS), str(PTO_STAGE / "ptoas" / f"{name}.pto"), "-o", str(out),
                    "--enable-insert-sync", "--pto-level=level2"], check=True)
    assert out.read_bytes() == (PTO_STAGE / "ptoas" / f"{name}.cpp").read_bytes()


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
    executor = pytest.importorskip("pypto_build.platforms.host.runtime.executor")
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


# --- `pypto-build example` whatever ptoas is installed (issue 22, item 2) ----------------------------------------


def example(dest: Path, *args: str, ptoas_dir: Path | None = None, log: Path | None = None):
    """`pypto-build example` with `ptoas_dir` first on PATH and as PTOAS_ROOT (None: no ptoas anywhere)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PTOAS_ROOT", "FAKE_PTOAS_LOG")}
    if ptoas_dir is not None:
        env["PATH"] = f"{ptoas_dir}{os.pathsep}{env['PATH']}"
        env["PTOAS_ROOT"] = str(ptoas_dir)
    if log is not None:
        env["FAKE_PTOAS_LOG"] = str(log)
    return subprocess.run(["pypto-build", "example", *args, str(dest)], capture_output=True, text=True, env=env,
                          timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("installed", ["none", "one that rejects its files", "the stand-in"])
def test_the_example_passes_whatever_ptoas_is_installed(tmp_path, installed):
    ptoas_dir = None
    if installed != "none":
        reject = "custom op 'pto.alloc_tile' is unknown" if installed.startswith("one that") else None
        ptoas_dir = make_fake_ptoas(tmp_path / "ptoas", version="0.50", reject=reject).parent
    log = tmp_path / "ptoas.log"
    out = example(tmp_path / "ex", ptoas_dir=ptoas_dir, log=log)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == "" and out.stdout.count("Golden validation: PASSED") == 2
    assert not log.exists()                                  # the example has no .pto: ptoas is never run
    assert not (tmp_path / "ex" / "ptoas").exists()


@pytest.mark.slow
def test_example_pto_runs_the_package_standin_and_applies_a_pto_edit(tmp_path):
    """With a ptoas on PATH and PTOAS_ROOT that rejects every file, `--pto` still uses the package's stand-in:
    the first run checks both units (unchanged), the .pto edit regenerates, splices and recompiles one kernel."""
    rejecting = make_fake_ptoas(tmp_path / "ptoas", version="0.50", reject="custom op 'pto.tload' is unknown")
    dest = tmp_path / "ex"
    out = example(dest, "--pto", ptoas_dir=rejecting.parent)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == "" and out.stdout.count("Golden validation: PASSED") == 2
    first, second = out.stdout.split("now editing")
    assert "[pto->cpp] checked ptoas/matmul_relu_incore_0_aic.pto: unchanged" in first
    assert "[pto->cpp] checked ptoas/matmul_relu_incore_1_aiv.pto: unchanged" in first
    assert "[pto->cpp] regenerating from ptoas/matmul_relu_incore_1_aiv.pto" in second
    assert "[pto->cpp]   spliced -> kernels/aiv/matmul_relu_incore_1_aiv.cpp" in second
    assert "compile:aiv/matmul_relu_incore_1_aiv" in second and "compile:aic/" not in second
    assert "1 compiled, 2 up to date" in second
    kernel = (dest / "kernels/aiv/matmul_relu_incore_1_aiv.cpp").read_text(encoding="utf-8")
    assert "// edited by `pypto-build example` --pto" in split(kernel, "kernel")[1]       # in the spliced body
    standin = dest / "standin_ptoas" / "ptoas"
    assert "labelled stand-in for ptoas" in standin.read_text(encoding="utf-8")
    assert "nothing here is a real ptoas" in (standin.parent / "README.txt").read_text(encoding="utf-8")
    assert f"--ptoas {standin}" in out.stdout                                   # the way to go on editing
    again = example(dest, "--pto", ptoas_dir=rejecting.parent)                 # an existing copy: replayed
    assert again.returncode == 0 and again.stderr == "" and "0 compiled" in again.stdout


@pytest.mark.slow
def test_the_example_exits_as_validate_does(tmp_path):
    """issue 34 item 4: `pypto-build example` on its copy gives the status `pypto-build validate` gives the copy
    (the one `BuildResult.status`): 2 for bad input (a FIFO among golden.py's data/ files), 1 for a compile
    error."""
    dest = tmp_path / "ex"
    assert example(dest).returncode == 0

    def statuses() -> list[int]:
        validated = subprocess.run(["pypto-build", "validate", "-q", str(dest)], capture_output=True, timeout=600)
        return [example(dest).returncode, validated.returncode]

    (dest / "data").mkdir()
    os.mkfifo(dest / "data" / "in.bin")
    assert statuses() == [2, 2]
    shutil.rmtree(dest / "data")
    inject(dest / "kernels/aiv/matmul_relu_incore_1_aiv.cpp", "not C++;")
    assert statuses() == [1, 1]
