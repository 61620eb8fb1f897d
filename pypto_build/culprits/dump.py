"""Read an argument dump, simpler's format, whichever runtime wrote it: simpler's (a2a3sim, a2a3: its
docs/dfx/args-dump.md) or pypto_build's host runtime (`platforms/host/runtime/dfx.py` writes the same format).

A dump is a folder `args_dump/` holding `args_dump.json` (the manifest: counters and one record per dumped
argument) and, when it has payloads, `args.bin`. `read_dump` checks every field of every record and that each
payload lies inside args.bin; a damaged or foreign dump is one `UserError` line naming the file, what is wrong
and the fix. Payloads are read lazily (`Arg.tensor()`), so reading the manifest costs no torch.

Submission order: simpler's `task_id` is `(ring << 32) | local id`, the ring being the scope depth
(tensormap_and_ringbuffer; host_build_graph has one ring). Local ids count up in submission order within a ring;
the dump does not record how tasks of different rings interleave (simpler's dep-gen output, `deps.json`, lists the
tasks in the submit stream's order). `Dump.tasks` follows the task_id order (simpler writes its manifest in it):
the submission order for a one-ring program (PyPTO's orchestrations submit inside one `PTO2_SCOPE`: ring 1) and
for every host dump (the host's task_id is its submission index), ring by ring otherwise: the same order for two
runs of one program, which is what aligning them needs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..builddir.markers import ARGS_DUMP_BIN, ARGS_DUMP_DIR, ARGS_DUMP_MANIFEST
from ..core.limits import read_capped
from ..errors import TooLarge, UserError, one_line

__all__ = ["Arg", "Task", "Dump", "read_dump", "MANIFEST", "BIN", "MAX_MANIFEST_BYTES"]

MANIFEST, BIN, DUMP_DIR = ARGS_DUMP_MANIFEST, ARGS_DUMP_BIN, ARGS_DUMP_DIR
MAX_MANIFEST_BYTES = 1 << 30      # a full dump of a large program: about 300 bytes per record
ROLES = ("input", "output", "inout")
STAGES = ("before_dispatch", "after_completion")
KINDS = ("tensor", "scalar")
# simpler's DataType names (get_dtype_name) -> (bytes per element, torch dtype name or None: raw bytes).
DTYPES = {
    "FLOAT32": (4, "float32"), "FLOAT16": (2, "float16"), "INT32": (4, "int32"), "INT16": (2, "int16"),
    "INT8": (1, "int8"), "UINT8": (1, "uint8"), "BFLOAT16": (2, "bfloat16"), "INT64": (8, "int64"),
    "UINT64": (8, "uint64"), "UINT16": (2, "uint16"), "UINT32": (4, "uint32"), "BOOL": (1, "bool"),
    "FP8E4M3FN": (1, "float8_e4m3fn"), "FP8E8M0": (1, "float8_e8m0fnu"), "FP4E2M1": (1, None), "UNKNOWN": (1, None),
}
_FIX = "rerun the program with the argument dump (--dump-args 2) to write it again"


@dataclass(frozen=True)
class Arg:
    """One dumped argument (one manifest record). `name`: the buffer's name where the runtime knows it (the
    host's `name` field), else `arg<arg_index>`. `truncated` / `overwritten`: its payload cannot be trusted."""

    task_id: int
    func_id: tuple[int, ...]
    arg_index: int
    role: str
    stage: str
    kind: str
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    start_offset: int
    is_contiguous: bool
    truncated: bool
    overwritten: bool
    bin_offset: int
    bin_size: int
    name: str
    value: Any = None                                   # a scalar's value, as the manifest writes it
    bin_path: Path | None = field(default=None, compare=False, repr=False)

    @property
    def is_output(self) -> bool:
        """What the task produced: a tensor output or inout, captured after completion."""
        return self.kind == "tensor" and self.role != "input" and self.stage == "after_completion"

    @property
    def trusted(self) -> bool:
        """Its payload can be compared: present, neither truncated nor overwritten."""
        return self.bin_size > 0 and not (self.truncated or self.overwritten)

    @property
    def numel(self) -> int:
        count = 1
        for extent in self.shape:
            count *= extent
        return count

    def tensor(self) -> Any:
        """The payload as a torch tensor of `shape` (logical, row-major), read now from args.bin; a dtype torch
        cannot hold (FP4, UNKNOWN) comes as raw uint8 bytes. Raises UserError when there is none."""
        import torch

        if self.bin_path is None or self.bin_size == 0:
            raise UserError(f"{self.bin_path or MANIFEST}: task 0x{self.task_id:016x} argument {self.arg_index} "
                            "has no payload; dump at level 2 (--dump-args 2) to compare tensors")
        with open(self.bin_path, "rb") as handle:
            handle.seek(self.bin_offset)
            data = bytearray(handle.read(self.bin_size))
        if len(data) != self.bin_size:
            raise UserError(f"{self.bin_path}: ends inside the payload of task 0x{self.task_id:016x} argument "
                            f"{self.arg_index}; {_FIX}")
        torch_name = DTYPES[self.dtype][1]
        dtype = getattr(torch, torch_name, None) if torch_name else None
        raw = torch.frombuffer(data, dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)
        if dtype is None:
            return raw
        values = raw.view(dtype)
        return values if self.truncated else values.reshape(self.shape)


@dataclass(frozen=True)
class Task:
    """One dumped task: `index` its place in submission order (module docstring), its runtime `task_id`, its
    kernels (`func_id`: several for a mixed task, `(-1,)` where the runtime does not say) and its records."""

    index: int
    task_id: int
    func_id: tuple[int, ...]
    args: tuple[Arg, ...]

    @property
    def outputs(self) -> tuple[Arg, ...]:
        """Its tensor outputs and inouts as they were after it completed, by arg_index."""
        return tuple(a for a in self.args if a.is_output)


@dataclass(frozen=True)
class Dump:
    """A read dump: its folder, level, counters of loss (`truncated_args`, `dropped_records`,
    `dropped_overwrite`) and tasks in submission order."""

    folder: Path
    level: int
    tasks: tuple[Task, ...]
    truncated_args: int = 0
    dropped_records: int = 0
    dropped_overwrite: int = 0

    @property
    def lossy(self) -> bool:
        """Records were dropped or overwritten: tasks or payloads may be missing."""
        return bool(self.dropped_records or self.dropped_overwrite)


def _folder(path: Path) -> Path:
    """The args_dump folder of `path`: the folder itself, its manifest, or a dfx_outputs folder holding it."""
    path = Path(path)
    if path.name == MANIFEST:
        return path.parent
    if not (path / MANIFEST).exists() and (path / DUMP_DIR / MANIFEST).exists():
        return path / DUMP_DIR
    return path


class _Checker:
    """Field checks of one manifest: every failure is one UserError line naming the manifest."""

    def __init__(self, manifest: Path) -> None:
        self.manifest = manifest

    def fail(self, what: str, fix: str = _FIX) -> UserError:
        return UserError(f"{self.manifest}: {what}; {fix}")

    def get(self, obj: dict, key: str, kinds: type | tuple, where: str) -> Any:
        if key not in obj:
            raise self.fail(f"{where} has no {key!r}")
        value = obj[key]
        if isinstance(value, bool) and kinds in (int, (int,)):
            raise self.fail(f"{where} {key!r} is {value!r}, not a number")
        if not isinstance(value, kinds):
            raise self.fail(f"{where} {key!r} is {one_line(repr(value), 60)}, not {_kind_name(kinds)}")
        return value

    def count(self, obj: dict, key: str, where: str) -> int:
        value = self.get(obj, key, int, where)
        if value < 0:
            raise self.fail(f"{where} {key!r} is {value}, not a count")
        return value

    def ints(self, obj: dict, key: str, where: str, *, low: int = 0) -> tuple[int, ...]:
        values = self.get(obj, key, list, where)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= low for v in values):
            raise self.fail(f"{where} {key!r} is {one_line(repr(values), 60)}, not a list of integers >= {low}")
        return tuple(values)

    def choice(self, obj: dict, key: str, choices: tuple[str, ...], where: str) -> str:
        value = self.get(obj, key, str, where)
        if value not in choices:
            raise self.fail(f"{where} {key!r} is {one_line(repr(value), 40)}, not one of {', '.join(choices)}")
        return value


def _kind_name(kinds: type | tuple) -> str:
    names = {int: "a number", str: "a string", list: "a list", bool: "true/false", dict: "an object"}
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def read_dump(path: Path) -> Dump:
    """Read the dump at `path` (an `args_dump/` folder, its `args_dump.json`, or the `dfx_outputs/` folder that
    holds it) into a `Dump`, every field checked; payloads stay in args.bin until asked for."""
    import json

    folder = _folder(path)
    manifest = folder / MANIFEST
    check = _Checker(manifest)
    try:
        data = read_capped(manifest, MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise UserError(f"{manifest}: no argument dump there; {_FIX}") from None
    except TooLarge as exc:
        raise check.fail(f"{exc}") from None
    except OSError as exc:
        raise check.fail(f"cannot be read ({one_line(exc.strerror or exc, 120)})", "check the path and its "
                         "permissions") from None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise check.fail(f"is not JSON ({one_line(exc, 100)})") from None
    if not isinstance(doc, dict):
        raise check.fail("is not a JSON object: not an argument dump manifest")
    top = "the manifest"
    level = check.count(doc, "dump_args_level", top)
    counters = {key: check.count(doc, key, top) for key in ("total_args", "truncated_args", "dropped_records",
                                                            "dropped_overwrite")}
    bin_file = doc.get("bin_file")
    if bin_file is not None and (not isinstance(bin_file, str) or not bin_file or "/" in bin_file
                                 or bin_file in (".", "..")):
        raise check.fail(f"'bin_file' is {one_line(repr(bin_file), 60)}, not a file name beside it")
    records = check.get(doc, "args", list, top)
    if len(records) != counters["total_args"]:
        raise check.fail(f"'total_args' is {counters['total_args']} but 'args' holds {len(records)} records")
    bin_path, bin_size = _bin(folder, bin_file, check)
    args = [_arg(check, rec, i, bin_path, bin_size) for i, rec in enumerate(records)]
    return Dump(folder, level, _tasks(args), counters["truncated_args"], counters["dropped_records"],
                counters["dropped_overwrite"])


def _bin(folder: Path, bin_file: str | None, check: _Checker) -> tuple[Path | None, int]:
    if bin_file is None:
        return None, 0
    path = folder / bin_file
    try:
        return path, os.stat(path).st_size
    except FileNotFoundError:
        raise check.fail(f"its payload file {bin_file} is missing beside it") from None
    except OSError as exc:
        raise check.fail(f"its payload file {bin_file} cannot be read ({one_line(exc.strerror or exc, 80)})",
                         "check its permissions") from None


def _arg(check: _Checker, rec: Any, i: int, bin_path: Path | None, bin_size: int) -> Arg:
    where = f"args[{i}]"
    if not isinstance(rec, dict):
        raise check.fail(f"{where} is not an object")
    raw_id = check.get(rec, "task_id", str, where)
    try:
        task_id = int(raw_id, 16)
    except ValueError:
        raise check.fail(f"{where} 'task_id' is {one_line(repr(raw_id), 40)}, not a hex number") from None
    func_id = check.ints(rec, "func_id", where, low=-1)
    if not func_id:
        raise check.fail(f"{where} 'func_id' is empty")
    kind = check.choice(rec, "kind", KINDS, where)
    dtype = check.get(rec, "dtype", str, where).upper()
    if dtype not in DTYPES:
        raise check.fail(f"{where} 'dtype' is {one_line(repr(dtype), 40)}, not one of simpler's DataType names")
    shape, strides = check.ints(rec, "shape", where), check.ints(rec, "strides", where)
    if len(strides) != len(shape):
        raise check.fail(f"{where} has {len(shape)} extents but {len(strides)} strides")
    arg = Arg(task_id=task_id, func_id=func_id, arg_index=check.count(rec, "arg_index", where),
              role=check.choice(rec, "role", ROLES, where), stage=check.choice(rec, "stage", STAGES, where),
              kind=kind, dtype=dtype, shape=shape, strides=strides,
              start_offset=check.count(rec, "start_offset", where),
              is_contiguous=check.get(rec, "is_contiguous", bool, where),
              truncated=check.get(rec, "truncated", bool, where),
              overwritten=check.get(rec, "overwritten", bool, where),
              bin_offset=check.count(rec, "bin_offset", where), bin_size=check.count(rec, "bin_size", where),
              name=rec["name"] if isinstance(rec.get("name"), str) and rec["name"] else f"arg{rec['arg_index']}",
              value=rec.get("value"), bin_path=bin_path)
    if arg.bin_size:
        if bin_path is None:
            raise check.fail(f"{where} has a {arg.bin_size}-byte payload but 'bin_file' is null")
        if arg.bin_offset + arg.bin_size > bin_size:
            raise check.fail(f"{where} payload (bytes {arg.bin_offset}..{arg.bin_offset + arg.bin_size}) lies "
                             f"past the end of {bin_path.name} ({bin_size} bytes)")
        want = arg.numel * DTYPES[dtype][0]
        if kind == "tensor" and not arg.truncated and arg.bin_size != want:
            raise check.fail(f"{where} payload is {arg.bin_size} bytes, its {dtype}{list(shape)} view holds {want}")
    return arg


def _tasks(args: list[Arg]) -> tuple[Task, ...]:
    """Group records by task_id, in task_id order (module docstring); a task's records keep the manifest's
    order (stage, arg_index)."""
    by_id: dict[int, list[Arg]] = {}
    for arg in args:
        by_id.setdefault(arg.task_id, []).append(arg)
    return tuple(Task(index, task_id, recs[0].func_id, tuple(recs))
                 for index, (task_id, recs) in enumerate(sorted(by_id.items())))
