"""A kept golden result, and the verdict made against it, depend on everything golden.py's result depends on
(issue 25 items 4-7): the sub-build's own files (whatever reads them: a C++ read the audit hook never sees,
a file that appears later), the environment variables golden.py read, the packages it ran on; an edited
cache entry is never trusted; and `validate` and `replay --validate` always agree.

Each case is a real directory through the real CLI: golden.py's expected `out` is scaled by a factor taken
from somewhere, the kernels are not, so a factor other than 1 must FAIL and 1 must PASS.
"""
from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import copy_dir, settle_ctimes
from pypto_build.testing import synth

pytest.importorskip("torch")

pytestmark = pytest.mark.slow

COMPUTE = '    tensors["out"][:] = out'
MISMATCH = "Output 'out' does not match golden"


def with_factor(root: Path, factor_source: str) -> Path:
    """golden.py's expected `out` times `_factor()`, defined by `factor_source` (module level)."""
    path = root / "golden.py"
    text = path.read_text()
    assert COMPUTE in text
    text = text.replace("import torch\n", "import os\nimport torch\nfrom pathlib import Path\n" + factor_source, 1)
    path.write_text(text.replace(COMPUTE, '    tensors["out"][:] = out * _factor()', 1))
    return root


def run(root: Path, *verb: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os
    return subprocess.run(["pypto-build", *verb, str(root)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def passes(root: Path, *verb: str, env: dict | None = None) -> str:
    out = run(root, *verb, env=env)
    assert out.returncode == 0 and "Golden validation: PASSED" in out.stdout, out.stdout + out.stderr
    return out.stdout


def fails(root: Path, *verb: str, env: dict | None = None) -> str:
    out = run(root, *verb, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert MISMATCH in out.stdout + out.stderr and "PASSED" not in out.stdout, out.stdout + out.stderr
    return out.stdout


def both_fail(root: Path, env: dict | None = None) -> None:
    """`validate` and `replay --validate` agree: both compare against a golden result computed again."""
    assert "golden: cached" not in fails(root, "validate", env=env)
    fails(root, "replay", "--validate", env=env)


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return copy_dir(built_golden, tmp_path / "g")


def write_f32(path: Path, value: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<f", value))


# --- item 4: every file of the sub-build, however golden.py reads it ------------------------------------


FROM_FILE = ("def _factor():\n    return float(torch.from_file(str(Path(__file__).parent / 'ref' / 'scale.bin'), "
             "size=1, dtype=torch.float32)[0])\n")


def test_a_file_read_by_torch_from_file_keys_the_golden_and_the_verdict(g):
    """torch.from_file reads in C++ (no audit event): the file is keyed because it is in the directory."""
    with_factor(g, FROM_FILE)
    write_f32(g / "ref/scale.bin", 1.0)
    passes(g, "validate")
    assert "(cached" in passes(g, "validate")                   # nothing changed: the verdict holds
    write_f32(g / "ref/scale.bin", 2.0)                          # not under data/: no file_dep of the verdict
    out = fails(g, "validate")
    assert "golden: computing again (ref/scale.bin changed)" in out
    fails(g, "replay", "--validate")
    write_f32(g / "ref/scale.bin", 1.0)                          # the other way: a right kernel passes again
    assert "golden: computing again (ref/scale.bin changed)" in passes(g, "replay", "--validate")
    assert "(cached" in passes(g, "validate")


def test_a_file_that_appears_later_keys_the_golden(g):
    """golden.py reads data/scale.txt only if it exists: creating it recomputes, though no run read it."""
    with_factor(g, "def _factor():\n    p = Path(__file__).parent / 'data' / 'scale.txt'\n"
                   "    return float(p.read_text()) if p.exists() else 1.0\n")
    passes(g, "validate")
    (g / "data").mkdir(exist_ok=True)
    (g / "data/scale.txt").write_text("2.0\n")
    out = fails(g, "validate")
    assert "golden: computing again (data/scale.txt is new)" in out
    fails(g, "replay", "--validate")
    (g / "data/scale.txt").unlink()
    assert "golden: computing again (data/scale.txt was removed)" in passes(g, "validate")


def test_deleting_the_kept_golden_result_clears_the_verdict(g):
    """The guide's remedy for a golden.py that is not a function of its files: delete .pypto_build/golden/."""
    passes(g, "validate")
    assert "(cached" in passes(g, "validate")
    shutil.rmtree(g / ".pypto_build/golden")
    out = passes(g, "validate")
    assert "(cached" not in out and "golden: cached" not in out
    assert (g / ".pypto_build/golden/golden.json").is_file()
    assert "(cached" in passes(g, "validate")


def test_our_own_and_generated_files_do_not_key_the_golden(g):
    """Binaries, sources the build compiles, our state and bytecode are not golden.py's inputs."""
    passes(g, "validate")
    k = synth.kernel_path(g, 0)
    k.write_text(k.read_text() + "\nint golden_trust_unused() { return 1; }\n")   # a new binary, the same result
    (g / "__pycache__").mkdir()
    (g / "__pycache__/x.pyc").write_bytes(b"\0")
    (g / "compile_commands.json").write_text("[]\n")
    out = passes(g, "validate")
    assert "golden: cached" in out


# --- item 5: environment variables golden.py reads ------------------------------------------------------


def test_an_environment_variable_golden_reads_keys_the_golden_and_the_verdict(g):
    with_factor(g, "def _factor():\n    return float(os.environ.get('RT_SCALE', '1'))\n")
    passes(g, "validate", env={"RT_SCALE": "1"})
    assert "(cached" in passes(g, "validate", env={"RT_SCALE": "1", "UNRELATED_VAR": "x"})
    out = fails(g, "validate", env={"RT_SCALE": "2"})
    assert "golden: computing again (environment variable RT_SCALE changed)" in out
    fails(g, "replay", "--validate", env={"RT_SCALE": "2"})
    passes(g, "validate")                                         # unset: the default, 1, again
    assert "golden: cached" in passes(g, "replay", "--validate")


def test_os_getenv_at_load_time_is_seen_too(g):
    with_factor(g, "_AT_LOAD = os.getenv('RT_SCALE_AT_LOAD', '1')\n\n\ndef _factor():\n    return float(_AT_LOAD)\n")
    passes(g, "replay", "--validate")
    both_fail(g, env={"RT_SCALE_AT_LOAD": "3"})


# --- item 6: the verdict follows whatever the golden result follows -------------------------------------


def fake_torch_version(where: Path, version: str) -> dict:
    """A torch distribution record earlier on sys.path: what `pip install torch==<version>` would change."""
    info = where / f"torch-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return {"PYTHONPATH": str(where)}


def test_a_torch_version_change_reaches_validate_as_it_reaches_replay(g, tmp_path):
    import importlib.metadata

    with_factor(g, "from importlib import metadata\n\n\ndef _factor():\n"
                   "    return 2.0 if metadata.version('torch') == '99.0' else 1.0\n")
    passes(g, "validate")
    assert "(cached" in passes(g, "validate")
    env = fake_torch_version(tmp_path / "site", "99.0")
    out = fails(g, "validate", env=env)
    assert f"golden: computing again (torch {importlib.metadata.version('torch')} -> 99.0)" in out
    fails(g, "replay", "--validate", env=env)
    passes(g, "validate")                                         # the real torch again


# --- item 7: an edited cache entry is never trusted -----------------------------------------------------


def wrong_kernel(root: Path) -> None:
    k = synth.kernel_path(root, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))


@pytest.mark.parametrize("how", ["one byte of RTOL", "ATOL by hand"])
def test_an_edited_entry_is_computed_again(g, how):
    passes(g, "validate")
    index = g / ".pypto_build/golden/golden.json"
    text = index.read_text()
    if how == "one byte of RTOL":
        assert '"rtol": 1e-05' in text
        index.write_text(text.replace('"rtol": 1e-05', '"rtol": 1e+05'))
    else:
        data = json.loads(text)
        data["atol"] = 1000
        index.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    settle_ctimes()
    wrong_kernel(g)
    out = fails(g, "validate")
    assert "golden: computing again (the cached entry was edited)" in out
    fails(g, "replay", "--validate")


def test_an_edited_entry_makes_the_verdict_run_again(g):
    passes(g, "validate")
    index = g / ".pypto_build/golden/golden.json"
    index.write_text(index.read_text().replace('"rtol": 1e-05', '"rtol": 1e+05'))
    out = passes(g, "validate")
    assert "(cached" not in out and "golden: computing again (the cached entry was edited)" in out
