"""The one dump reader and the comparison on simpler's own dumps: the shipped example (a PyPTO-generated program)
built and run on a2a3sim through simpler with `--dump-args 2`. Needs simpler (the `simpler` marker: skipped with a
reason where it is missing)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pypto_build.culprits import compare, kernel_map, read_dump
from pypto_build.run.golden import load_golden

pytestmark = [pytest.mark.simpler, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[1] / "pypto_build" / "examples" / "matmul_relu"
AIV = "kernels/aiv/matmul_relu_incore_1_aiv.cpp"


def dumped(root: Path, keep: Path) -> Path:
    """`pypto-build replay --dump-args 2` on the recorded a2a3sim (a real process); a copy of its dump."""
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_BUILD_PLATFORM"}
    done = subprocess.run([sys.executable, "-m", "pypto_build", "replay", "--dump-args", "2", str(root)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "[execute] running on simpler's a2a3sim" in done.stdout
    return Path(shutil.copytree(root / "dfx_outputs" / "args_dump", keep))


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("g++-15") is None:
        pytest.skip("needs g++-15 on PATH (tools/build-simpler.sh writes a shim into the simpler venv's "
                    "bin/: put that first on PATH; docs/platforms.md)")
    base = tmp_path_factory.mktemp("sim_dump")
    root = Path(shutil.copytree(EXAMPLE, base / "ex"))
    return root, dumped(root, base / "good")


def test_a_simpler_dump_reads_with_its_tensors(good):
    """simpler's manifest and args.bin, read by the reader the host's dump goes through: the two tasks in
    submission order, the matmul's inputs are golden.py's, its output a @ b, the last output golden's."""
    import torch

    root, folder = good
    dump = read_dump(folder)
    golden = load_golden(root)
    named = dict(golden.inputs())
    expected = golden.expected(dict(named))
    assert dump.level == 2 and not dump.lossy
    assert [t.func_id for t in dump.tasks] == [(0,), (1,)] and [t.index for t in dump.tasks] == [0, 1]
    matmul, relu = dump.tasks
    inputs = {a.arg_index: a for a in matmul.args if a.stage == "before_dispatch" and a.kind == "tensor"}
    torch.testing.assert_close(inputs[0].tensor(), named["a"], rtol=0, atol=0)
    torch.testing.assert_close(inputs[1].tensor(), named["b"], rtol=0, atol=0)
    (c,) = matmul.outputs
    assert (c.arg_index, c.name, c.dtype, c.shape) == (2, "arg2", "FLOAT32", (16, 16))
    torch.testing.assert_close(c.tensor(), named["a"] @ named["b"], rtol=golden.rtol, atol=golden.atol)
    torch.testing.assert_close(relu.outputs[0].tensor(), expected["out"], rtol=golden.rtol, atol=golden.atol)
    scalars = [a for a in matmul.args if a.kind == "scalar"]
    assert scalars and all(a.bin_size == 0 and a.value is not None for a in scalars)


def test_compare_names_the_mutated_kernel_on_a2a3sim(good, tmp_path):
    """One kernel mutated (the ReLU's bias doubled), the program rebuilt and run again through simpler: the
    comparison names its task, kernel and source; the matmul before it agrees."""
    root, folder = good
    mutated = Path(shutil.copytree(root, tmp_path / "ex", symlinks=True))
    shutil.rmtree(mutated / "dfx_outputs")
    kernel = mutated / AIV
    text = kernel.read_text()
    assert "c[i * N + j] + bias[j];" in text
    kernel.write_text(text.replace("c[i * N + j] + bias[j];", "c[i * N + j] + bias[j] * 2.0f;"))
    current = dumped(mutated, tmp_path / "current")
    golden = load_golden(root)
    result = compare(read_dump(folder), read_dump(current), golden.rtol, golden.atol, kernel_map(mutated))
    first = result.first
    assert result.parting is None and result.aligned == 2 and result.certain
    assert (first.index, first.func_id, first.kernel, first.arg_index) == (1, (1,), "matmul_relu_incore_1_aiv", 2)
    assert first.source == kernel.resolve() and first.later == 0 and first.differing > 0
    assert (first.output, first.param) == ("arg2", "out")
    assert first.max_abs > golden.atol and first.first_index is not None
