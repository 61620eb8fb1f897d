"""Validate PyPTO's metadata sidecars.

`compiled_meta.json` (L2, schema 1) and `distributed_meta.json` (L3, schema 2)
are checked in PyPTO's order (spec section 3.4).  Every problem with the
content is one `MetaError` (a `ValueError`) naming the file, the field and the
fix; a missing file is a plain `FileNotFoundError` from the `load_*` functions.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import atomic
from ..errors import MetaError, one_line
from ..core.limits import TooLarge, read_capped
from .manifest import DEFAULT_RUNTIME
from .markers import COMPILED_META, DISTRIBUTED_META

__all__ = [
    "COMPILED_META_SCHEMA",
    "DISTRIBUTED_META_SCHEMA",
    "DTYPES",
    "DIRECTIONS",
    "BACKEND_TYPES",
    "ParamMeta",
    "DistributedConfigMeta",
    "ProgramMeta",
    "load_compiled_meta",
    "load_distributed_meta",
    "load_sidecar",
    "parse_meta",
    "dump_meta",
    "write_meta",
]

COMPILED_META_SCHEMA = 1           # of markers.COMPILED_META (the file names live there: what marks a build dir)
DISTRIBUTED_META_SCHEMA = 2        # of markers.DISTRIBUTED_META
_FILENAMES = {COMPILED_META_SCHEMA: COMPILED_META, DISTRIBUTED_META_SCHEMA: DISTRIBUTED_META}

DTYPES = frozenset((
    "bool", "int4", "int8", "int16", "int32", "int64", "uint4", "uint8", "uint16", "uint32", "uint64",
    "fp4", "fp8e4m3fn", "fp8e5m2", "fp8e8m0", "fp16", "fp32", "bfloat16", "hf4", "hf8", "index", "task_id",
))
DIRECTIONS = ("In", "Out", "InOut")
BACKEND_TYPES = ("Ascend910B", "Ascend950")
DEFAULT_BACKEND = "Ascend910B"
_CONFIG_KEYS = ("device_ids", "num_sub_workers", "runtime", "aicpu_thread_num")


@dataclass(frozen=True)
class ParamMeta:
    """One orchestration parameter: `shape` is None for a scalar."""

    name: str
    direction: str
    shape: tuple[int, ...] | None
    dtype: str


@dataclass(frozen=True)
class DistributedConfigMeta:
    """The `distributed_config` block of `distributed_meta.json`."""

    device_ids: tuple[int, ...]
    num_sub_workers: int = 0
    runtime: str = DEFAULT_RUNTIME
    aicpu_thread_num: int = 0


@dataclass(frozen=True)
class ProgramMeta:
    """A validated sidecar."""

    path: Path
    schema: int
    params: tuple[ParamMeta, ...]
    num_return_types: int
    platform: str | None
    backend_type: str
    distributed_config: DistributedConfigMeta | None

    @property
    def output_indices(self) -> tuple[int, ...]:
        """Indices of the pure `Out` parameters (not `InOut`)."""
        return tuple(i for i, p in enumerate(self.params) if p.direction == "Out")


# PyPTO DataType string -> torch dtype name; anything else (fp8*, fp4, int4/uint4, hf4/hf8, task_id) is float32.
_TORCH_DTYPES = {
    "fp16": "float16", "fp32": "float32", "fp64": "float64", "bfloat16": "bfloat16", "bf16": "bfloat16",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "bool": "bool", "index": "int64",
}


def known_torch_dtype(dtype: str) -> str | None:
    """The torch dtype name of a compiled_meta dtype string, None when torch has no exact match."""
    return _TORCH_DTYPES.get(dtype)


def _short(value: Any, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # pragma: no cover - JSON values always repr
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Checker:
    def __init__(self, path: Path, schema: int) -> None:
        self.path = path
        self.schema = schema
        self.filename = _FILENAMES[schema]

    def bad(self, field: str | None, detail: str) -> MetaError:
        """PyPTO's `Invalid <file> in <path>: <field>: <detail>. ...` message."""
        where = f"{field}: " if field else ""
        return MetaError(
            f"Invalid {self.filename} in {one_line(self.path)}: {where}{one_line(detail)}. The metadata was "
            f"written by a different pypto version or hand-edited — recompile via ir.compile() to refresh."
        )

    def parse(self, text: str, validate_config: bool) -> ProgramMeta:
        try:
            meta = json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
            raise self.bad(None, f"not valid JSON ({one_line(exc, 200)})") from None
        if not isinstance(meta, dict):
            raise self.bad(None, f"expected a JSON object, got {type(meta).__name__}")
        found = meta.get("schema")
        if not (_is_int(found) and found == self.schema):
            raise MetaError(
                f"Incompatible {self.filename} schema {_short(found)} (expected {self.schema}) in "
                f"{one_line(self.path)}. The metadata was written by a different pypto version — recompile "
                f"via ir.compile() to refresh."
            )
        raw_params = meta.get("params")
        if not isinstance(raw_params, list):
            raise self.bad("params", f"must be a list, got {type(raw_params).__name__}")
        params = tuple(self.param(i, entry) for i, entry in enumerate(raw_params))
        num_return_types = meta.get("num_return_types", 0)
        if not _is_int(num_return_types) or num_return_types < 0:
            raise self.bad("num_return_types", f"must be a non-negative integer, got {_short(num_return_types)}")
        backend = meta.get("backend_type", DEFAULT_BACKEND)
        if not isinstance(backend, str) or backend not in BACKEND_TYPES:
            raise self.bad("backend_type", f"must be one of {sorted(BACKEND_TYPES)}, got {_short(backend)}")
        platform = meta.get("platform")
        if platform is not None and not isinstance(platform, str):
            raise self.bad("platform", f"must be a string or absent, got {type(platform).__name__}")
        config = None
        if self.schema == DISTRIBUTED_META_SCHEMA and validate_config:
            config = self.distributed_config(meta.get("distributed_config", {}))
        return ProgramMeta(self.path, self.schema, params, num_return_types, platform, backend, config)

    def param(self, i: int, entry: Any) -> ParamMeta:
        where = f"params[{i}]"
        if not isinstance(entry, dict):
            raise self.bad(where, f"must be an object, got {type(entry).__name__}")

        def get(key: str) -> Any:
            if key not in entry:
                raise self.bad(f"{where}.{key}", f"missing required key {key!r} ({where} is malformed)")
            return entry[key]

        name = get("name")
        if not isinstance(name, str):
            raise self.bad(f"{where}.name", f"must be a string, got {_short(name)}")
        direction = get("direction")
        if not isinstance(direction, str) or direction not in DIRECTIONS:
            raise self.bad(f"{where}.direction", f"must be one of {sorted(DIRECTIONS)}, got {_short(direction)}")
        shape = get("shape")
        if shape is not None and not (isinstance(shape, list) and all(_is_int(d) for d in shape)):
            raise self.bad(f"{where}.shape", f"must be null or a list of ints, got {_short(shape)}")
        dtype = get("dtype")
        if not isinstance(dtype, str):
            raise self.bad(f"{where}.dtype", f"must be a string, got {_short(dtype)}")
        if dtype not in DTYPES:
            raise self.bad(f"{where}.dtype", f"unknown DataType string {_short(dtype)}; known: {sorted(DTYPES)}")
        return ParamMeta(name, direction, None if shape is None else tuple(shape), dtype)

    def distributed_config(self, raw: Any) -> DistributedConfigMeta:
        field = "distributed_config"
        if not isinstance(raw, dict):
            raise self.bad(field, f"must be an object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - set(_CONFIG_KEYS))
        if unknown:
            raise self.bad(field, f"has unknown key(s) {_short(unknown, 200)}; known: {sorted(_CONFIG_KEYS)}")
        device_ids = raw.get("device_ids", [0])
        if not (isinstance(device_ids, list) and all(_is_int(d) for d in device_ids)):
            raise self.bad(f"{field}.device_ids", f"must be a list of ints, got {_short(device_ids)}")
        for key in ("num_sub_workers", "aicpu_thread_num"):
            if key in raw and not _is_int(raw[key]):
                raise self.bad(f"{field}.{key}", f"must be an int, got {_short(raw[key])}")
        runtime = raw.get("runtime", DEFAULT_RUNTIME)
        if not isinstance(runtime, str):
            raise self.bad(f"{field}.runtime", f"must be a string, got {_short(runtime)}")
        # value constraints, as DistributedConfig.__post_init__ enforces them
        if not device_ids:
            raise self.bad(f"{field}.device_ids", "must not be empty")
        if any(d < 0 for d in device_ids):
            raise self.bad(f"{field}.device_ids", f"must be non-negative device indices, got {_short(device_ids)}")
        if len(set(device_ids)) != len(device_ids):
            raise self.bad(f"{field}.device_ids", f"must be distinct, got {_short(device_ids)}")
        num_sub_workers = raw.get("num_sub_workers", 0)
        if num_sub_workers < 0:
            raise self.bad(f"{field}.num_sub_workers", f"must be non-negative, got {num_sub_workers}")
        threads = raw.get("aicpu_thread_num", 0)
        if threads < 0 or threads == 1:
            raise self.bad(f"{field}.aicpu_thread_num",
                           f"must be 0 (architecture default) or at least 2, got {threads}")
        return DistributedConfigMeta(tuple(device_ids), num_sub_workers, runtime, threads)


def parse_meta(text: str, path: Path, *, schema: int, validate_config: bool = True) -> ProgramMeta:
    """Validate decoded sidecar `text` (schema 1 or 2); raises only `MetaError`.

    With `validate_config=False` (a caller-supplied override replaces it) the
    schema-2 `distributed_config` block is not read and the result carries None.
    """
    if schema not in _FILENAMES:
        raise ValueError(f"parse_meta: unsupported schema {schema!r}; expected 1 or 2")
    checker = _Checker(Path(path), schema)
    try:
        return checker.parse(text, validate_config)
    except MetaError:
        raise
    except Exception as exc:  # last-resort guard: the contract is MetaError only
        raise checker.bad(None, f"could not be validated ({type(exc).__name__}: {one_line(exc, 200)})") from None


def _load(path: Path, schema: int, validate_config: bool) -> ProgramMeta:
    path = Path(path)
    checker = _Checker(path, schema)
    try:
        data = read_capped(path)
    except TooLarge as exc:
        raise checker.bad(None, str(exc)) from None
    except FileNotFoundError:
        raise
    except OSError as exc:  # a directory, permissions, I/O error
        raise checker.bad(None, f"cannot be read ({one_line(exc)})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise checker.bad(None, f"is not valid UTF-8 text ({one_line(exc)})") from None
    return parse_meta(text, path, schema=schema, validate_config=validate_config)


def load_compiled_meta(path: Path) -> ProgramMeta:
    """Load `compiled_meta.json` (schema 1). Missing file -> FileNotFoundError."""
    return _load(path, COMPILED_META_SCHEMA, True)


def load_distributed_meta(path: Path, *, validate_config: bool = True) -> ProgramMeta:
    """Load `distributed_meta.json` (schema 2). Missing file -> FileNotFoundError."""
    return _load(path, DISTRIBUTED_META_SCHEMA, validate_config)


def load_sidecar(directory: Path) -> ProgramMeta | None:
    """The sidecar of a build or sub-build directory: compiled_meta.json, else distributed_meta.json
    (validated); None when it has neither."""
    for name, load in ((COMPILED_META, load_compiled_meta),
                       (DISTRIBUTED_META, load_distributed_meta)):
        if (Path(directory) / name).is_file():
            return load(Path(directory) / name)
    return None


def dump_meta(meta: ProgramMeta) -> str:
    """Serialise like PyPTO: `json.dumps(..., indent=2)`, PyPTO's key order, no trailing newline."""
    out: dict[str, Any] = {
        "schema": meta.schema,
        "params": [
            {"name": p.name, "direction": p.direction, "shape": None if p.shape is None else list(p.shape),
             "dtype": p.dtype}
            for p in meta.params
        ],
        "num_return_types": meta.num_return_types,
        "platform": meta.platform,
        "backend_type": meta.backend_type,
    }
    dc = meta.distributed_config
    if meta.schema == DISTRIBUTED_META_SCHEMA and dc is not None:
        out["distributed_config"] = {
            "device_ids": list(dc.device_ids),
            "num_sub_workers": dc.num_sub_workers,
            "runtime": dc.runtime,
            "aicpu_thread_num": dc.aicpu_thread_num,
        }
    return json.dumps(out, indent=2)


def write_meta(meta: ProgramMeta, path: Path | None = None) -> None:
    """Write `meta` atomically to `path` (default `meta.path`)."""
    atomic.write_text(Path(path) if path is not None else meta.path, dump_meta(meta))
