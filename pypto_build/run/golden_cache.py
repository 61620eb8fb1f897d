"""The cached golden result of a sub-build: golden.py's inputs and expected outputs, computed once per content.

Running golden.py (generate_inputs, compute_golden) can cost more than the
program itself. Its result depends on golden.py, on every file it read while it
ran (data files, helper modules: the child's audit hook records them), on the
parameters it is called with, and on the Python, torch and third-party packages
it ran on. `save` keeps the newest result of a sub-build under
`.pypto_build/golden/` with all of that; `lookup` returns it while every one of
those is unchanged (content digests, never mtimes), so `replay --validate`,
`validate`, `ci` and the API run golden.py only after one of them changed.

Two files: `golden.pt` (the inputs as generate_inputs returned them, before the
program ran, and the expected outputs) and `golden.json` (the key, and the digest
of `golden.pt`), each written atomically, the index last. An index that does not
name the data's digest (a writer killed between the two, a damaged or foreign
file) is a miss: the result is recomputed and stored again, never trusted.
golden.py is assumed to be a function of what it reads: one that draws unseeded
random numbers, reads the clock or an environment variable, or lists a directory
gets its first result reused until one of the recorded inputs changes.
"""
from __future__ import annotations

import ctypes
import io
import json
import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Iterable, Sequence

from .. import atomic
from ..confine import confine_tree, inside
from ..errors import one_line
from ..hashing import bytes_digest, file_digest
from ..limits import read_capped
from ..markers import STATE_DIR
from ..racy import changed_since
from ..safeio import read_bytes
from .golden import GOLDEN_PARAMS, INPUT_PARAMS, Golden

FORMAT = 1
FOLDER = f"{STATE_DIR}/golden"
INDEX = "golden.json"
DATA = "golden.pt"


@dataclass
class Entry:
    """A cached golden result that still holds: what golden.py returned and what it read."""

    names: list[str]
    inputs: list                     # generate_inputs' values, in order, as they were before any run
    expected: dict                   # output name -> expected tensor
    outputs: list[str]
    rtol: float
    atol: float
    reads: list[str]                 # absolute paths of the files golden.py read
    computed: float                  # when golden.py ran (time.time())
    path: Path                       # golden.py

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.computed))

    def golden(self) -> Golden:
        """A Golden that answers `__outputs__`, RTOL and ATOL as golden.py did, without running it."""
        module = ModuleType("golden (cached)")
        module.__outputs__, module.RTOL, module.ATOL = list(self.outputs), self.rtol, self.atol
        return Golden(self.path, module)

    def same_inputs(self, values: Sequence) -> bool:
        """Whether `values` (a caller's tensors) are exactly the cached inputs: same types, dtypes, shapes,
        strides and bytes, so compute_golden would compute the cached expected outputs from them."""
        return len(values) == len(self.inputs) and all(_same(a, b) for a, b in zip(values, self.inputs))


def lookup(sub: Path) -> tuple[Entry | None, str | None]:
    """The sub-build's cached golden result if it still holds, else (None, why not; None when none is kept)."""
    folder = Path(sub) / FOLDER
    try:
        raw = read_capped(folder / INDEX)
    except FileNotFoundError:
        return None, None
    except Exception as exc:            # noqa: BLE001 - a damaged entry is a miss, never a failure
        return None, f"the cached entry is unreadable ({_short(exc)})"
    try:
        index = json.loads(raw)
        if not isinstance(index, dict) or index.get("format") != FORMAT:
            return None, "the cached entry has another format"
        stale = _stale(Path(sub), index)
        if stale:
            return None, stale
        data = read_bytes(folder / DATA)
        if bytes_digest(data) != index["data"]:
            return None, f"{FOLDER}/{DATA} does not match its index"
        return _entry(Path(sub), index, data), None
    except Exception as exc:            # noqa: BLE001 - as above
        return None, f"the cached entry is unreadable ({_short(exc)})"


def save(sub: Path, golden: Golden, names: list[str], inputs: dict, expected: dict, reads: Iterable[str],
         modules: Iterable[str], started_ns: int) -> str | None:
    """Keep golden.py's result (`inputs`: the values before the run). Returns why it was not kept, or None.

    Nothing is kept when a file golden.py read may have changed while it ran (since `started_ns`), or when
    an input is not a tensor, a number or a ctypes scalar (torch.load(weights_only=True) reads back only
    plain data). A file system that refuses the write raises OSError; a cache folder that resolves outside
    the build directory, LayoutError.
    """
    import torch

    sub = Path(sub).absolute()
    encoded = []
    for name in names:
        value = _encode(inputs[name])
        if value is None:
            return f"input {name!r} is a {type(inputs[name]).__name__}"
        encoded.append(value)
    digests = {}
    for path in sorted(set(reads)):
        st = os.stat(path)
        if changed_since(st, started_ns):
            return f"{path} changed while golden.py ran"
        digests[_key(sub, path)] = file_digest(path, st)
    buf = io.BytesIO()
    torch.save({"inputs": encoded, "expected": {n: v.detach().cpu() for n, v in expected.items()}}, buf)
    data = buf.getvalue()
    index = {"format": FORMAT, "computed": time.time(), "golden_py": _golden_digest(sub),
             "params": _params(), "environment": environment(torch.__version__, modules), "reads": digests,
             "names": list(names), "outputs": list(expected), "rtol": golden.rtol, "atol": golden.atol,
             "data": bytes_digest(data)}
    folder = sub / FOLDER
    confine_tree(sub, folder, "golden cache folder")
    atomic.write_bytes(folder / DATA, data, sweep=True)
    atomic.write_text(folder / INDEX, json.dumps(index, indent=1, sort_keys=True) + "\n", sweep=True)
    return None


def environment(torch_version: str, modules: Iterable[str]) -> dict:
    """Python's and torch's versions, and those of the installed distributions providing `modules`
    (the top-level modules golden.py imported or holds); local modules are read files instead."""
    from importlib import metadata

    providers = metadata.packages_distributions()
    packages = {}
    for module in sorted(set(modules)):
        for dist in providers.get(module, ()):
            if dist.lower() != "torch" and dist not in packages:
                try:
                    packages[dist] = metadata.version(dist)
                except metadata.PackageNotFoundError:
                    continue
    return {"python": platform.python_version(), "torch": torch_version, "packages": packages}


def modules_of(module: ModuleType) -> set[str]:
    """Top-level names of the modules `module`'s namespace holds (`import numpy as np`, even when torch had
    already imported numpy, so golden.py's own import recorded nothing)."""
    return {v.__name__.partition(".")[0] for v in vars(module).values() if isinstance(v, ModuleType)}


# --- the key -------------------------------------------------------------------------------------------------


def _stale(sub: Path, index: dict) -> str | None:
    """Why the index no longer holds, or None."""
    from importlib import metadata

    import torch

    if index["golden_py"] != _golden_digest(sub):
        return "golden.py changed"
    if index["params"] != _params():
        return "the parameters golden.py is called with changed"
    env = index["environment"]
    if env["python"] != platform.python_version():
        return f"Python {env['python']} -> {platform.python_version()}"
    if env["torch"] != torch.__version__:
        return f"torch {env['torch']} -> {torch.__version__}"
    for dist, version in env["packages"].items():
        try:
            now = metadata.version(dist)
        except metadata.PackageNotFoundError:
            now = "none"
        if now != version:
            return f"{dist} {version} -> {now}"
    for key, digest in index["reads"].items():
        try:
            same = file_digest(_path(sub, key)) == digest
        except OSError:
            return f"{key}, which golden.py read, is gone"
        if not same:
            return f"{key}, which golden.py read, changed"
    return None


def _golden_digest(sub: Path) -> str | None:
    try:
        return file_digest(os.fspath(sub / "golden.py"))
    except OSError:
        return None


def _params() -> dict:
    return {"inputs": INPUT_PARAMS, "golden": GOLDEN_PARAMS}


def _key(sub: Path, path: str) -> str:
    """A read's key: relative to the sub-build inside it (a copied directory keeps its entry), else absolute."""
    root = os.path.realpath(sub)
    return Path(os.path.relpath(path, root)).as_posix() if inside(path, root) else path


def _path(sub: Path, key: str) -> str:
    return key if os.path.isabs(key) else os.path.join(os.path.realpath(sub), key)


# --- the data ------------------------------------------------------------------------------------------------


def _entry(sub: Path, index: dict, data: bytes) -> Entry:
    """The entry from its index and data; ValueError/TypeError/KeyError when either is not what save wrote."""
    import torch

    stored = torch.load(io.BytesIO(data), weights_only=True)
    names, outputs = index["names"], index["outputs"]
    rtol, atol = float(index["rtol"]), float(index["atol"])
    inputs = [_decode(v) for v in stored["inputs"]]
    expected = stored["expected"]
    if not (_strings(names) and _strings(outputs) and set(outputs) <= set(names) and len(inputs) == len(names)
            and isinstance(expected, dict) and list(expected) == outputs
            and all(isinstance(t, torch.Tensor) for t in expected.values())
            and all(not math.isnan(x) and x >= 0 for x in (rtol, atol))):
        raise ValueError("its fields do not fit together")
    reads = sorted(_path(sub, k) for k in index["reads"])
    return Entry(list(names), inputs, expected, list(outputs), rtol, atol, reads, float(index["computed"]),
                 Path(sub) / "golden.py")


def _strings(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _encode(value):
    """An input as plain data torch.load(weights_only=True) reads back, or None when it has no such form."""
    import torch

    if isinstance(value, torch.Tensor):
        return ("tensor", value.detach())
    if type(value) in (bool, int, float):
        return ("py", value)
    kind = type(value).__name__
    if isinstance(value, ctypes._SimpleCData) and getattr(ctypes, kind, None) is type(value):
        return ("ctypes", kind, value.value)
    return None


def _decode(item):
    kind = item[0]
    if kind in ("tensor", "py") and len(item) == 2:
        return item[1]
    if kind == "ctypes" and len(item) == 3:
        made = getattr(ctypes, item[1], None)
        if isinstance(made, type) and issubclass(made, ctypes._SimpleCData):
            return made(item[2])
    raise ValueError(f"an input of kind {one_line(repr(kind), 40)}")


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if (a.dtype, a.shape, a.stride(), a.device) != (b.dtype, b.shape, b.stride(), b.device):
            return False
        try:
            return torch.equal(_bytes(a), _bytes(b))
        except (RuntimeError, TypeError):
            return False
    if type(a) is not type(b):
        return False
    return a.value == b.value if isinstance(a, ctypes._SimpleCData) else a == b


def _bytes(t):
    """The tensor's elements as bytes, in order: -0.0 and 0.0, or two NaNs, compare as what they are."""
    import torch

    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def _short(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}", 160)
