"""The cached golden result of a sub-build: golden.py's inputs and expected outputs, computed once per content.

Running golden.py (generate_inputs, compute_golden) can cost more than the
program itself. Its result depends on the sub-build's own files, on every other
file it read while it ran, on the environment variables it read, on the
parameters it is called with, and on the Python, torch and third-party packages
it ran on: the key `golden_key` states and checks (the verdict's check uses the
same one). `save` keeps the newest result of a sub-build under
`.pypto_build/golden/` with that key; `lookup` returns it while the key holds
(content digests, never mtimes), so `replay --validate`, `validate`, `ci` and
the API run golden.py only after something it depends on changed.

Two files: `golden.pt` (the inputs as generate_inputs returned them, before the
program ran, and the expected outputs) and `golden.json` (the key, the digest of
`golden.pt`, and the seal: a digest of the index itself), each written
atomically, the index last. An index that does not name the data's digest (a
writer killed between the two, a damaged or foreign file) or whose seal does not
match (an edited tolerance) is a miss: the result is recomputed and stored
again, never trusted. golden.py is assumed to be a function of what the key
holds: one that draws unseeded random numbers, reads the clock or lists a
directory outside its own gets its first result reused until the key changes.
"""
from __future__ import annotations

import ctypes
import io
import math
import os
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Iterable, Sequence

from ..core import atomic
from . import golden_key
from ..builddir.markers import GOLDEN_PY
from ..core.confine import confine_tree
from ..errors import one_line
from ..core.filestate import State, make_state
from .golden_key import DATA, FOLDER, INDEX
from ..core.hashing import bytes_digest
from ..core.racy import changed_since
from ..core.safeio import read_bytes
from .golden import Golden


@dataclass
class Entry:
    """A cached golden result that still holds: what golden.py returned and what the result is keyed on."""

    names: list[str]
    inputs: list                     # generate_inputs' values, in order, as they were before any run
    expected: dict                   # output name -> expected tensor
    outputs: list[str]
    rtol: float
    atol: float
    files: list[str]                 # absolute paths of the files the result is keyed on
    computed: float                  # when golden.py ran (time.time())
    path: Path                       # golden.py
    seal: str                        # the index's seal: which result a verdict was compared against

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


@dataclass
class Before:
    """What is taken before golden.py runs: when it started, the sub-build's files and links, sys.path."""

    started_ns: int
    files: dict[str, State]
    links: dict[str, str]
    paths: list | None


def lookup(sub: Path) -> tuple[Entry | None, str | None]:
    """The sub-build's cached golden result if it still holds, else (None, why not; None when none is kept)."""
    sub = Path(sub)
    index, why = golden_key.load(sub)
    if index is None:
        return None, why
    stale = golden_key.stale(sub, index)
    if stale:
        return None, stale
    try:
        data = read_bytes(sub / FOLDER / DATA)
        if bytes_digest(data) != index["data"]:
            return None, f"{FOLDER}/{DATA} does not match its index"
        return _entry(sub, index, data), None
    except Exception as exc:            # noqa: BLE001 - a damaged entry is a miss, never a failure
        return None, f"the cached entry is unreadable ({_short(exc)})"


def before(sub: Path) -> Before:
    """Taken before golden.py runs (its files, as the key will hold them)."""
    started_ns = time.time_ns()
    files, links = golden_key.snapshot(sub)
    return Before(started_ns, files, links, golden_key.path_signature())


def save(sub: Path, golden: Golden, names: list[str], inputs: dict, expected: dict, taken: Before,
         reads: Iterable[str], modules: Iterable[str], environ: dict[str, str | None]) -> tuple[str | None, str | None]:
    """Keep golden.py's result (`inputs`: the values before the run): (the entry's seal, None), or (None, why it
    was not kept).

    Nothing is kept when a file the key holds may have changed while golden.py ran (since `taken`), or when
    an input is not a tensor, a number or a ctypes scalar (torch.load(weights_only=True) reads back only
    plain data). `environ`: the variables golden.py read and the values it saw. A file system that refuses
    the write raises OSError; a cache folder that resolves outside the build directory, LayoutError.
    """
    import torch

    sub = Path(sub).absolute()
    encoded = []
    for name in names:
        value = _encode(inputs[name])
        if value is None:
            return None, f"input {name!r} is a {type(inputs[name]).__name__}"
        encoded.append(value)
    files = dict(taken.files)
    for rel in files:
        try:
            if changed_since(os.stat(sub / rel), taken.started_ns):
                return None, f"{rel} changed while golden.py ran"
        except OSError:
            return None, f"{rel} was removed while golden.py ran"
    read = set()
    for path in sorted(set(reads)):
        st = os.stat(path)
        if changed_since(st, taken.started_ns):
            return None, f"{path} changed while golden.py ran"
        key = golden_key.key_of(sub, path)
        if key not in files:                    # outside the sub-build's own files: kept as a read
            read.add(key)
            files[key] = make_state(path, st)
    buf = io.BytesIO()
    torch.save({"inputs": encoded, "expected": {n: v.detach().cpu() for n, v in expected.items()}}, buf)
    data = buf.getvalue()
    index = {"format": golden_key.FORMAT, "computed": time.time(), "params": golden_key.params(),
             "python": golden_key.python_version(), "paths": taken.paths, "packages": golden_key.versions(distributions(modules)),
             "environ": {n: golden_key.environ_digest(v) for n, v in sorted(environ.items())},
             "files": dict(sorted(files.items())), "read": sorted(read), "links": taken.links,
             "names": list(names), "outputs": list(expected), "rtol": golden.rtol, "atol": golden.atol,
             "data": bytes_digest(data)}
    index["seal"] = golden_key.seal(index)
    folder = sub / FOLDER
    confine_tree(sub, folder, "golden cache folder")
    atomic.write_bytes(folder / DATA, data, sweep=True)
    atomic.write_text(folder / INDEX, json.dumps(index, indent=1, sort_keys=True) + "\n", sweep=True)
    return index["seal"], None


def distributions(modules: Iterable[str]) -> list[str]:
    """The installed distributions providing `modules` (the top-level modules golden.py imported or holds;
    local modules are files of the key instead)."""
    from importlib import metadata

    providers = metadata.packages_distributions()
    return sorted({dist for module in set(modules) for dist in providers.get(module, ())})


def modules_of(module: ModuleType) -> set[str]:
    """Top-level names of the modules `module`'s namespace holds (`import numpy as np`, even when torch had
    already imported numpy, so golden.py's own import recorded nothing)."""
    return {v.__name__.partition(".")[0] for v in vars(module).values() if isinstance(v, ModuleType)}


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
    files = sorted(os.path.abspath(golden_key.path_of(sub, k)) for k in index["files"])
    return Entry(list(names), inputs, expected, list(outputs), rtol, atol, files, float(index["computed"]),
                 Path(sub) / GOLDEN_PY, index["seal"])


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
