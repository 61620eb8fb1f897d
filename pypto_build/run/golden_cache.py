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

Two files: `golden.pt` (the expected outputs, and the inputs only when golden.py's
generate_inputs cannot make them again) and `golden.json` (the key, a digest of
each input, the digest of `golden.pt`, and the seal: a digest of the index
itself), each written atomically, the index last. An entry first keeps no
inputs: the next run calls generate_inputs and uses the kept result only when
every input has the digest the result was computed from (`Entry.regenerated`);
when they differ (an unseeded generator), golden.py's result is computed again
and kept with its inputs, which later runs reuse. An index that does not name the data's digest (a
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

import xxhash

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
    inputs: list | None              # generate_inputs' values as they were before any run; None: not kept
    digests: list[str]               # each input's `input_digest`: what the expected outputs were computed from
    expected: dict                   # output name -> expected tensor
    outputs: list[str]
    rtol: float
    atol: float
    files: list[str]                 # absolute paths of the files the result is keyed on
    computed: float                  # when golden.py ran (time.time())
    path: Path                       # golden.py
    seal: str                        # the index's seal: which result a verdict was compared against
    index: dict                      # the whole index: `golden_key.stale` checks it again before a run uses it

    @property
    def when(self) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.computed))

    def golden(self) -> Golden:
        """A Golden that answers `__outputs__`, RTOL and ATOL as golden.py did, without running it."""
        module = ModuleType("golden (cached)")
        module.__outputs__, module.RTOL, module.ATOL = list(self.outputs), self.rtol, self.atol
        return Golden(self.path, module)

    def same_inputs(self, values: Sequence) -> bool:
        """Whether `values` (a caller's tensors, or generate_inputs' values made again) are exactly the inputs
        the expected outputs were computed from: same types, dtypes, shapes, strides and bytes (compared with the
        kept inputs, or with their digests when none are kept)."""
        if self.inputs is not None:
            return len(values) == len(self.inputs) and all(_same(a, b) for a, b in zip(values, self.inputs))
        return input_digests(values) == self.digests


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


def save(sub: Path, golden: Golden, names: list[str], inputs: dict, expected: dict, key: dict, *,
         keep_inputs: bool = False) -> tuple[str | None, str | None]:
    """Keep golden.py's result under `key` (`key_index`'s; `inputs`: the values before the run, stored only with
    `keep_inputs`, their digests always): (the entry's seal, None), or (None, why it was not kept).

    Nothing is kept when an input is not a tensor, a number or a ctypes scalar (torch.load(weights_only=True)
    reads back only plain data). A file system that refuses the write raises OSError; a cache folder that
    resolves outside the build directory, LayoutError.
    """
    import torch

    sub = Path(sub).absolute()
    encoded = []
    for name in names:
        value = _encode(inputs[name])
        if value is None:
            return None, f"input {name!r} is a {type(inputs[name]).__name__}"
        encoded.append(value)
    index = dict(key)
    buf = io.BytesIO()
    torch.save({"inputs": encoded if keep_inputs else None,
                "expected": {n: v.detach().cpu() for n, v in expected.items()}}, buf)
    data = buf.getvalue()
    index.update({"computed": time.time(), "names": list(names), "outputs": list(expected),
                  "rtol": golden.rtol, "atol": golden.atol, "inputs": input_digests([inputs[n] for n in names]),
                  "inputs_kept": bool(keep_inputs),
                  "data": bytes_digest(data)})
    index["seal"] = golden_key.seal(index)
    folder = sub / FOLDER
    confine_tree(sub, folder, "golden cache folder")
    atomic.write_bytes(folder / DATA, data, sweep=True)
    atomic.write_text(folder / INDEX, json.dumps(index, indent=1, sort_keys=True) + "\n", sweep=True)
    return index["seal"], None


def key_index(sub: Path, taken: Before, reads: Iterable[str], modules: Iterable[str],
              environ: dict[str, str | None]) -> tuple[dict | None, str | None]:
    """What golden.py's result is keyed on (the index's key fields; `golden_key.stale` checks them), or (None,
    why it cannot be keyed: a file of the key may have changed while golden.py ran, since `taken`). `reads`:
    the files it was seen reading; `modules`: the top-level modules it imported or holds; `environ`: the
    variables it read and the values it saw."""
    sub = Path(sub).absolute()
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
    return {"format": golden_key.FORMAT, "params": golden_key.params(), "python": golden_key.python_version(),
            "paths": taken.paths, "packages": golden_key.versions(distributions(modules)),
            "environ": {n: golden_key.environ_digest(v) for n, v in sorted(environ.items())},
            "files": dict(sorted(files.items())), "read": sorted(read), "links": taken.links}, None


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
    names, outputs, digests = index["names"], index["outputs"], index["inputs"]
    rtol, atol = float(index["rtol"]), float(index["atol"])
    inputs = None if stored["inputs"] is None else [_decode(v) for v in stored["inputs"]]
    expected = stored["expected"]
    if not (_strings(names) and _strings(outputs) and set(outputs) <= set(names) and _strings(digests)
            and len(digests) == len(names) and (inputs is None or len(inputs) == len(names))
            and isinstance(expected, dict) and list(expected) == outputs
            and all(isinstance(t, torch.Tensor) for t in expected.values())
            and all(not math.isnan(x) and x >= 0 for x in (rtol, atol))):
        raise ValueError("its fields do not fit together")
    files = sorted(os.path.abspath(golden_key.path_of(sub, k)) for k in index["files"])
    return Entry(list(names), inputs, list(digests), expected, list(outputs), rtol, atol, files,
                 float(index["computed"]), Path(sub) / GOLDEN_PY, index["seal"], index)


def input_digests(values: Sequence) -> list[str] | None:
    """Each input's digest (a tensor's dtype, shape, strides and bytes; a number's or ctypes scalar's type and
    value), or None when one has no plain form (`_encode`)."""
    import torch

    digests = []
    for value in values:
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu()
            hasher = xxhash.xxh3_128(repr(("tensor", str(t.dtype), tuple(t.shape), t.stride())).encode())
            hasher.update(_bytes(t).numpy().data)
            digests.append(hasher.hexdigest())
            continue
        encoded = _encode(value)
        if encoded is None:
            return None
        digests.append(bytes_digest(repr(encoded).encode()))
    return digests


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
