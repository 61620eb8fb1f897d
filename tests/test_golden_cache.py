"""golden.py runs once per content (issue 14 item 5): its inputs and expected outputs are kept under
`.pypto_build/golden/` and reused by `replay --validate`, `validate`, `ci` and the API until golden.py, a
file it read or the parameters / packages it ran with change; a damaged entry is computed again; a wrong
kernel still fails against the kept result."""
from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from conftest import copy_dir, edit, settle_ctimes
from importlib import metadata

from pypto_build.run import golden_key
from pypto_build.core.hashing import bytes_digest
from pypto_build.run import golden_cache
from pypto_build.run.golden import load_golden
from pypto_build.testing import synth

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

# golden.py of the synthetic directory, made to count its calls (in calls.txt beside the directory) and to
# read its inputs from data files: `a` from data/in/a.pt (torch), a factor of one from data/one.npy (numpy).
COUNTING = '''
import numpy as np
from pathlib import Path

_HERE = Path(__file__).parent


def _count(what):
    with open(_HERE.parent / "calls.txt", "a") as handle:
        handle.write(what + "\\n")
'''
RANDN = "    gen = torch.Generator().manual_seed(1234)\n    a = torch.randn((16,), generator=gen, dtype=torch.float32)\n"
LOAD = '    _count("inputs")\n    a = torch.load(_HERE / "data" / "in" / "a.pt", weights_only=True)\n'
COMPUTE = '    a = tensors["a"]\n'
SCALED = '    _count("golden")\n    a = tensors["a"] * float(np.load(_HERE / "data" / "one.npy")[0])\n'


def counting_golden(root: Path, seed: int = 1) -> Path:
    text = (root / "golden.py").read_text()
    assert RANDN in text and COMPUTE in text
    text = text.replace("import torch\n", "import torch\n" + COUNTING, 1).replace(RANDN, LOAD).replace(COMPUTE, SCALED)
    (root / "golden.py").write_text(text)
    (root / "data" / "in").mkdir(parents=True, exist_ok=True)
    write_a(root, seed)
    np.save(root / "data" / "one.npy", np.array([1.0], dtype=np.float32))
    return root


def write_a(root: Path, seed: int) -> None:
    torch.save(torch.randn(16, generator=torch.Generator().manual_seed(seed)), root / "data" / "in" / "a.pt")


def new_binary(root: Path, kernel: int) -> None:
    """Change a kernel's binary, not its result (a comment alone may leave the binary as it was)."""
    edit(synth.kernel_path(root, kernel), f"\nint golden_cache_test_unused_{kernel}() {{ return {kernel}; }}\n")


def calls(root: Path) -> list[str]:
    path = root.parent / "calls.txt"
    return path.read_text().split() if path.exists() else []


def computed(root: Path) -> int:
    """How many times compute_golden ran (generate_inputs runs on every run that reuses a result whose inputs
    were not kept: `golden_cache`)."""
    return calls(root).count("golden")


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=300)


def validated(root: Path, *, verb: tuple[str, ...] = ("replay", "--validate")) -> str:
    out = run("pypto-build", *verb, str(root))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Golden validation: PASSED" in out.stdout
    return out.stdout


@pytest.fixture
def g(built_golden, tmp_path) -> Path:
    return counting_golden(copy_dir(built_golden, tmp_path / "g"))


@pytest.mark.slow
def test_golden_runs_once_per_content(g):
    assert "golden: cached" not in validated(g)
    assert computed(g) == 1
    assert (g / ".pypto_build/golden/golden.json").is_file()
    edit(synth.kernel_path(g, 0))                              # a new binary, the same result
    out = validated(g)
    assert "golden: cached (computed " in out and "generate_inputs() made the same inputs" in out
    assert out.index("golden: cached") < out.index("[execute]")
    assert calls(g) == ["inputs", "golden", "inputs"]          # the inputs made again, compute_golden not run
    again = validated(g, verb=("validate",))                   # the verdict is keyed on the kept reads
    assert "Golden validation: PASSED (cached" in again and computed(g) == 1

    write_a(g, seed=2)                                         # a data file golden.py read (torch)
    out = validated(g, verb=("validate",))
    assert "golden: computing again (data/in/a.pt changed)" in out
    assert computed(g) == 2
    np.save(g / "data" / "one.npy", np.array([1.0], dtype=np.float64))     # (numpy) same value, new bytes
    assert "golden: computing again (data/one.npy changed)" in validated(g)
    assert computed(g) == 3
    edit(g / "golden.py", "\n# edited\n")
    assert "golden: computing again (golden.py changed)" in validated(g)
    assert computed(g) == 4
    assert "golden: cached" in validated(g) and computed(g) == 4
    plain = run("pypto-build", "replay", str(g))                 # a plain replay takes the kept inputs too
    assert plain.returncode == 0 and "golden: cached" in plain.stdout and computed(g) == 4


@pytest.mark.slow
def test_a_damaged_entry_is_computed_again(g):
    validated(g)
    folder = g / ".pypto_build/golden"
    data = (folder / "golden.pt").read_bytes()
    (folder / "golden.pt").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))          # one flipped bit
    assert "golden/golden.pt does not match its index" in validated(g)
    assert computed(g) == 2
    (folder / "golden.json").write_text((folder / "golden.json").read_text()[:40])   # a torn index
    assert "the cached entry is unreadable" in validated(g)
    assert computed(g) == 3
    (folder / "golden.pt").unlink()
    validated(g)
    assert computed(g) == 4
    assert "golden: cached" in validated(g) and computed(g) == 4


@pytest.mark.slow
def test_a_wrong_kernel_still_fails_against_the_kept_result(g):
    validated(g)
    k = synth.kernel_path(g, 1)
    k.write_text(k.read_text().replace("0.5f", "0.75f"))
    out = run("pypto-build", "replay", "--validate", str(g))
    assert out.returncode == 1 and "golden: cached" in out.stdout
    assert "Output 'out' does not match golden" in out.stdout + out.stderr
    assert "Golden validation: PASSED" not in out.stdout
    assert computed(g) == 1


@pytest.mark.slow
def test_the_api_and_ci_reuse_it(g):
    import pypto_build

    validated(g)
    index = (g / ".pypto_build/golden/golden.json").read_bytes()
    new_binary(g, 0)
    result = pypto_build.validate(g, progress=None)
    assert result.names("ran", "validate:") == ["validate:."] and computed(g) == 1
    new_binary(g, 2)
    out = run("pypto-build", "ci", str(g))
    assert out.returncode == 0 and "(verdict reused)" not in out.stdout, out.stdout + out.stderr
    assert computed(g) == 1

    a, out_t = torch.load(g / "data/in/a.pt"), torch.zeros(16)           # the caller's tensors, golden's values
    assert pypto_build.replay(g, a, out_t, validate=True, progress=None).validated == ["out"]
    assert computed(g) == 1 and out_t.abs().sum() > 0
    other, out_t = a + 1, torch.zeros(16)                                # other inputs: golden.py runs on them
    assert pypto_build.replay(g, other, out_t, validate=True, progress=None).validated == ["out"]
    assert computed(g) == 2
    assert (g / ".pypto_build/golden/golden.json").read_bytes() == index   # ... and nothing of theirs is kept


# --- the store, in process (no build) ---------------------------------------------------------------------


@pytest.fixture
def d(tmp_path) -> Path:
    root = counting_golden(synth.write_l2(tmp_path / "d", kernels=1, golden=True))
    settle_ctimes()                         # written before golden.py "ran" (keep's started_ns: now)
    return root


def keep(root: Path, inputs: dict | None = None, started_ns: int | None = None, keep_inputs: bool = False) -> str | None:
    taken = golden_cache.before(root)
    if started_ns is not None:
        taken = dataclasses.replace(taken, started_ns=started_ns)
    golden = load_golden(root)
    pairs = dict(golden.inputs())
    if inputs is not None:
        pairs = inputs
    expected = golden.expected(pairs)
    reads = [str((root / p).resolve()) for p in ("golden.py", "data/in/a.pt", "data/one.npy")]
    key, why = golden_cache.key_index(root, taken, reads, {"numpy", "json"}, {})
    if key is None:
        return why
    seal, why = golden_cache.save(root, golden, list(pairs), pairs, expected, key, keep_inputs=keep_inputs)
    assert (seal is None) == (why is not None)
    return why


OWN = ("compiled_meta.json", "data/in/a.pt", "data/one.npy", "golden.py")      # the sub-build's own files


@pytest.mark.parametrize("kept", [True, False], ids=["inputs kept", "digests only"])
def test_kept_inputs_come_back_as_they_were(d, kept):
    """With its inputs kept, an entry gives them back as they were; without (the default: generate_inputs makes
    them again), golden.pt holds only the expected outputs. Either way an input is the one the result was
    computed from only when its type, dtype, shape, strides and bytes are the same."""
    a = torch.load(d / "data/in/a.pt")
    big = torch.arange(4096, dtype=torch.float32)
    inputs = {"a": a, "out": torch.zeros(16), "n": ctypes.c_int32(7), "f": 0.5, "big": big}
    assert keep(d, inputs, keep_inputs=kept) is None
    entry, why = golden_cache.lookup(d)
    assert why is None and entry.names == ["a", "out", "n", "f", "big"]
    size = (d / ".pypto_build/golden/golden.pt").stat().st_size
    if kept:
        assert torch.equal(entry.inputs[0], a) and entry.inputs[2].value == 7
        assert type(entry.inputs[2]) is ctypes.c_int32 and size > big.nbytes
    else:
        assert entry.inputs is None and size < big.nbytes      # the expected outputs only
    inputs.pop("big")
    entry = dataclasses.replace(entry, names=entry.names[:4], digests=entry.digests[:4],
                                inputs=entry.inputs[:4] if kept else None)
    assert entry.outputs == ["out"] and entry.rtol == entry.atol == 1e-5
    assert entry.files == sorted(str(d / p) for p in OWN)
    index = json.loads((d / ".pypto_build/golden/golden.json").read_text())
    assert set(index["files"]) == set(OWN) and index["read"] == []      # relative: a copy keeps it
    assert index["packages"] == {"numpy": np.__version__, "torch": metadata.version("torch")}
    assert index["seal"] == golden_key.seal(index)
    same = [a.clone(), torch.zeros(16), ctypes.c_int32(7), 0.5]
    assert entry.same_inputs(same)
    assert not entry.same_inputs([a.clone(), -torch.zeros(16), ctypes.c_int32(7), 0.5])    # -0.0 is not 0.0
    assert not entry.same_inputs([a.clone(), torch.zeros(16), ctypes.c_int64(7), 0.5])
    assert not entry.same_inputs([a.clone(), torch.zeros(16, 2)[:, 0], ctypes.c_int32(7), 0.5])   # strides
    assert not entry.same_inputs(same[:3])


def resealed(index: Path, change) -> None:
    """Change the index as a run on another installation would have written it (sealed again)."""
    saved = json.loads(index.read_text())
    change(saved)
    saved["seal"] = golden_key.seal(saved)
    index.write_text(json.dumps(saved))


def test_what_makes_the_entry_stale(d, tmp_path):
    assert keep(d) is None
    assert golden_cache.lookup(d)[1] is None
    copy = copy_dir(d, tmp_path / "copy")                      # moved directories keep their entry
    assert golden_cache.lookup(copy)[0] is not None
    os.unlink(d / "data/one.npy")
    assert golden_cache.lookup(d) == (None, "data/one.npy was removed")
    np.save(d / "data/one.npy", np.array([1.0], dtype=np.float32))
    assert golden_cache.lookup(d)[1] is None                   # the same bytes again
    (d / "data/notes.txt").write_text("new\n")                 # a file nobody read yet
    assert golden_cache.lookup(d) == (None, "data/notes.txt is new")
    index = copy / ".pypto_build/golden/golden.json"
    resealed(index, lambda s: s["packages"].update(numpy="0.0"))
    assert golden_cache.lookup(copy)[1] is None                # nothing on sys.path moved: versions not asked
    resealed(index, lambda s: s.update(paths=None))
    assert golden_cache.lookup(copy) == (None, f"numpy 0.0 -> {np.__version__}")
    resealed(index, lambda s: s["packages"].update(numpy=np.__version__, torch="1.0"))
    assert golden_cache.lookup(copy) == (None, f"torch 1.0 -> {metadata.version('torch')}")
    resealed(index, lambda s: (s["packages"].update(torch=metadata.version("torch")),
                               s["environ"].update(PYPTO_TEST_UNSET_VAR=golden_key.environ_digest("1"))))
    assert golden_cache.lookup(copy) == (None, "environment variable PYPTO_TEST_UNSET_VAR changed")
    index.write_text(index.read_text().replace('"rtol": 1e-05', '"rtol": 1e+05'))
    assert golden_cache.lookup(copy) == (None, "the cached entry was edited")


def test_a_foreign_data_file_is_a_miss_not_a_failure(d):
    assert keep(d) is None
    folder = d / ".pypto_build/golden"
    buf = folder / "golden.pt"
    torch.save({"inputs": [("tensor", torch.zeros(1))], "expected": {}}, buf)   # well-formed, wrong fields
    index = json.loads((folder / "golden.json").read_text())
    index["data"] = bytes_digest(buf.read_bytes())
    (folder / "golden.json").write_text(json.dumps(index))
    assert golden_cache.lookup(d) == (None, "the cached entry was edited")
    resealed(folder / "golden.json", lambda s: None)
    entry, why = golden_cache.lookup(d)
    assert entry is None and why.startswith("the cached entry is unreadable")


def test_nothing_is_kept_when_it_could_be_wrong(d):
    assert "changed while golden.py ran" in keep(d, started_ns=time.time_ns() - 10**10)
    assert keep(d, {"a": torch.zeros(16), "out": torch.zeros(16), "s": "text"}) == "input 's' is a str"
    assert golden_cache.lookup(d) == (None, None)


def test_the_files_that_key_the_golden(tmp_path):
    """The sub-build's own files: not ours (state, bytecode), not the build's (binaries, stamps, DFX outputs),
    not the program it compiles (kernels, orchestration, .pto, other sub-builds); links to folders by target."""
    root = tmp_path / "sub"
    for rel in ("golden.py", "compiled_meta.json", "kernel_config.py", "compile_commands.json", "notes.md",
                "data/in/a.pt", "ref/deep/x.bin", "helpers/m.py", "helpers/__pycache__/m.cpython-311.pyc",
                ".pypto_build/golden/golden.json", "cache/binary_context.json", "kernels/aiv/k.cpp",
                "orchestration/o.cpp", "ptoas/u.pto", "next_levels/c/golden.py", "dfx_outputs/x.json",
                "debug/run.py", "report/perf_hints.log", "passes_dump/00.py", "data/kernels/k.bin"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    os.mkfifo(root / "data/fifo")                           # never read
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "data/big")
    os.symlink(root / "notes.md", root / "data/notes-link.md")
    files, links = golden_key.tree(root)
    assert files == ["compiled_meta.json", "data/in/a.pt", "data/kernels/k.bin", "data/notes-link.md", "golden.py",
                     "helpers/m.py", "notes.md", "ref/deep/x.bin"]
    assert links == {"data/big": str(tmp_path / "elsewhere")}


@pytest.mark.slow
def test_an_unseeded_generator_gets_its_inputs_kept(built_golden, tmp_path):
    """generate_inputs that draws unseeded random numbers cannot make the inputs of the kept result again: the
    next run sees other digests and computes golden.py's result again, now kept with its inputs, which the
    runs after it reuse without calling golden.py at all."""
    g = copy_dir(built_golden, tmp_path / "g")
    text = (g / "golden.py").read_text()
    assert RANDN in text and COMPUTE in text
    unseeded = '    _count("inputs")\n    a = torch.randn((16,), dtype=torch.float32)\n'
    (g / "golden.py").write_text(text.replace("import torch\n", "import torch\n" + COUNTING, 1)
                                 .replace(RANDN, unseeded).replace(COMPUTE, '    _count("golden")\n' + COMPUTE))
    validated(g)
    digests_only = (g / ".pypto_build/golden/golden.pt").stat().st_size
    new_binary(g, 0)
    out = validated(g)
    assert "golden: computing again (golden.py's generate_inputs() made other inputs than last time)" in out
    assert calls(g) == ["inputs", "golden", "inputs", "golden"]
    assert (g / ".pypto_build/golden/golden.pt").stat().st_size > digests_only        # the inputs, kept now
    new_binary(g, 1)
    out = validated(g)
    assert "golden: cached (computed " in out and "golden.py not run" in out
    assert calls(g) == ["inputs", "golden", "inputs", "golden"]
