"""Tests for pypto_build.builddir.sidecars: compiled_meta.json / distributed_meta.json."""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_build.errors import MetaError
from pypto_build.builddir.sidecars import (DistributedConfigMeta, ParamMeta, ProgramMeta, dump_meta,
                                           load_compiled_meta, load_distributed_meta, parse_meta, write_meta)

P1 = Path("/build/x/compiled_meta.json")
P2 = Path("/build/x/distributed_meta.json")
TAIL = "The metadata was written by a different pypto version or hand-edited — recompile via ir.compile() to refresh."

# Section 3.1 example, as a Python object in PyPTO's key order.
L2: dict[str, Any] = {
    "schema": 1,
    "params": [
        {"name": "a", "direction": "In", "shape": [128, 128], "dtype": "fp32"},
        {"name": "b", "direction": "In", "shape": [128, 128], "dtype": "fp32"},
        {"name": "c", "direction": "Out", "shape": [128, 128], "dtype": "fp32"},
        {"name": "n", "direction": "In", "shape": None, "dtype": "int32"},
    ],
    "num_return_types": 1,
    "platform": "a2a3sim",
    "backend_type": "Ascend910B",
}
# Section 3.2 example.
L3: dict[str, Any] = {
    "schema": 2,
    "params": [
        {"name": "a", "direction": "In", "shape": [128, 128], "dtype": "fp32"},
        {"name": "b", "direction": "In", "shape": [128, 128], "dtype": "fp32"},
        {"name": "f", "direction": "Out", "shape": [128, 128], "dtype": "fp32"},
    ],
    "num_return_types": 1,
    "platform": "a2a3sim",
    "backend_type": "Ascend910B",
    "distributed_config": {"device_ids": [0, 1], "num_sub_workers": 0,
                           "runtime": "tensormap_and_ringbuffer", "aicpu_thread_num": 0},
}


def parse(obj: Any, schema: int = 1, **kw: Any) -> ProgramMeta:
    return parse_meta(json.dumps(obj), P1 if schema == 1 else P2, schema=schema, **kw)


def test_parse_l2_example() -> None:
    m = parse(L2)
    assert m.path == P1 and m.schema == 1 and m.num_return_types == 1
    assert m.params[2] == ParamMeta("c", "Out", (128, 128), "fp32")
    assert m.params[3] == ParamMeta("n", "In", None, "int32")
    assert (m.platform, m.backend_type, m.distributed_config) == ("a2a3sim", "Ascend910B", None)
    assert m.output_indices == (2,)


def test_parse_l3_example() -> None:
    m = parse(L3, 2)
    assert m.schema == 2 and m.output_indices == (2,)
    assert m.distributed_config == DistributedConfigMeta((0, 1), 0, "tensormap_and_ringbuffer", 0)


def test_defaults_and_inout_not_output() -> None:
    obj = {"schema": 2, "params": [{"name": "x", "direction": "InOut", "shape": [-1, 4], "dtype": "bfloat16"}],
           "extra_key": {"ignored": True}}
    m = parse(obj, 2)
    assert (m.num_return_types, m.platform, m.backend_type) == (0, None, "Ascend910B")
    assert m.distributed_config == DistributedConfigMeta((0,))
    assert m.output_indices == () and m.params[0].shape == (-1, 4)


def test_validate_config_false_skips_block() -> None:
    obj = copy.deepcopy(L3)
    obj["distributed_config"] = {"device_ids": [], "bogus": 1}
    assert parse(obj, 2, validate_config=False).distributed_config is None
    with pytest.raises(MetaError, match=r"distributed_config"):
        parse(obj, 2)


def test_schema1_ignores_distributed_config() -> None:
    obj = dict(L2, distributed_config="not checked")
    assert parse(obj).distributed_config is None


@pytest.mark.parametrize("obj,schema", [(L2, 1), (L3, 2)])
def test_round_trip_and_exact_format(obj: dict, schema: int) -> None:
    m = parse(obj, schema)
    text = dump_meta(m)
    assert text == json.dumps(obj, indent=2)  # PyPTO's writer: indent=2, its key order, no newline
    assert not text.endswith("\n")
    assert parse_meta(text, m.path, schema=schema) == m


def test_write_meta_atomic_and_exact(tmp_path: Path) -> None:
    target = tmp_path / "compiled_meta.json"
    target.write_text("old", encoding="utf-8")
    m = parse(L2)
    write_meta(m, target)
    assert sorted(os.listdir(tmp_path)) == ["compiled_meta.json"]  # no temp file left behind
    assert target.read_text(encoding="utf-8") == json.dumps(L2, indent=2)
    assert load_compiled_meta(target) == ProgramMeta(target, 1, m.params, 1, "a2a3sim", "Ascend910B", None)


def test_write_meta_default_path(tmp_path: Path) -> None:
    target = tmp_path / "distributed_meta.json"
    m = parse_meta(json.dumps(L3), target, schema=2)
    write_meta(m)
    assert os.listdir(tmp_path) == ["distributed_meta.json"]
    assert load_distributed_meta(target) == m


def test_load_read_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_compiled_meta(tmp_path / "compiled_meta.json")
    with pytest.raises(FileNotFoundError):
        load_distributed_meta(tmp_path / "distributed_meta.json")
    d = tmp_path / "compiled_meta.json"
    d.mkdir()
    with pytest.raises(MetaError, match=r"^Invalid compiled_meta\.json in .*: cannot be read \("):
        load_compiled_meta(d)
    f = tmp_path / "distributed_meta.json"
    f.write_bytes(b'{"schema": 2, "x": "\xff"}')
    with pytest.raises(MetaError, match=r"is not valid UTF-8 text") as info:
        load_distributed_meta(f)
    assert str(f) in str(info.value) and str(info.value).endswith(TAIL)


@pytest.mark.parametrize("text,needle", [
    ("", "not valid JSON"), ("{", "not valid JSON"), ("[1, 2]", "expected a JSON object, got list"),
    ("null", "expected a JSON object, got NoneType"), ("[" * 100_000, "not valid JSON"),
])
def test_bad_json(text: str, needle: str) -> None:
    with pytest.raises(MetaError) as info:
        parse_meta(text, P1, schema=1)
    msg = str(info.value)
    assert msg.startswith(f"Invalid compiled_meta.json in {P1}: ") and needle in msg and msg.endswith(TAIL)


@pytest.mark.parametrize("value", [None, 2, "1", True, 1.0, [1]])
def test_schema_mismatch(value: Any) -> None:
    obj = dict(L2)
    if value is None:
        del obj["schema"]
    else:
        obj["schema"] = value
    with pytest.raises(MetaError) as info:
        parse(obj)
    assert str(info.value) == (
        f"Incompatible compiled_meta.json schema {value!r} (expected 1) in {P1}. The metadata was written by a "
        f"different pypto version — recompile via ir.compile() to refresh.")


def test_schema_mismatch_l3() -> None:
    with pytest.raises(MetaError, match=r"^Incompatible distributed_meta\.json schema 1 \(expected 2\)"):
        parse(dict(L3, schema=1), 2)


def _set(obj: dict, dotted: str, value: Any) -> dict:
    """Copy `obj` with the dotted path (`params.2.dtype`) set; `...` deletes it."""
    obj = copy.deepcopy(obj)
    *parents, last = dotted.split(".")
    node: Any = obj
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    key = int(last) if isinstance(node, list) else last
    if value is ...:
        del node[key]
    else:
        node[key] = value
    return obj


FIELD_ERRORS = [
    # (schema, dotted path, bad value, field named in the message)
    (1, "params", None, "params"), (1, "params", ..., "params"), (1, "params", {"a": 1}, "params"),
    (1, "params.1", "b", "params[1]"), (1, "params.1", [1], "params[1]"),
    (1, "params.1.name", ..., "params[1].name"), (1, "params.1.name", 3, "params[1].name"),
    (1, "params.2.direction", ..., "params[2].direction"), (1, "params.2.direction", "out", "params[2].direction"),
    (1, "params.2.direction", "mro", "params[2].direction"), (1, "params.2.direction", 1, "params[2].direction"),
    (1, "params.0.shape", ..., "params[0].shape"), (1, "params.0.shape", [True, 2], "params[0].shape"),
    (1, "params.0.shape", [1.5], "params[0].shape"), (1, "params.0.shape", "128", "params[0].shape"),
    (1, "params.0.shape", 128, "params[0].shape"),
    (1, "params.2.dtype", ..., "params[2].dtype"), (1, "params.2.dtype", "float32", "params[2].dtype"),
    (1, "params.2.dtype", "fp64", "params[2].dtype"), (1, "params.2.dtype", None, "params[2].dtype"),
    (1, "num_return_types", -1, "num_return_types"), (1, "num_return_types", True, "num_return_types"),
    (1, "num_return_types", 1.0, "num_return_types"), (1, "num_return_types", "1", "num_return_types"),
    (1, "backend_type", "mro", "backend_type"), (1, "backend_type", "ascend910b", "backend_type"),
    (1, "backend_type", None, "backend_type"), (1, "backend_type", 0, "backend_type"),
    (1, "platform", 3, "platform"), (1, "platform", ["a2a3"], "platform"),
    (2, "params.0.dtype", "half", "params[0].dtype"),
    (2, "distributed_config", [0, 1], "distributed_config"),
    (2, "distributed_config", None, "distributed_config"),
    (2, "distributed_config.block_dim", 1, "distributed_config"),
    (2, "distributed_config.device_ids", [], "distributed_config.device_ids"),
    (2, "distributed_config.device_ids", [0, -1], "distributed_config.device_ids"),
    (2, "distributed_config.device_ids", [1, 1], "distributed_config.device_ids"),
    (2, "distributed_config.device_ids", [True], "distributed_config.device_ids"),
    (2, "distributed_config.device_ids", [0.0], "distributed_config.device_ids"),
    (2, "distributed_config.device_ids", 0, "distributed_config.device_ids"),
    (2, "distributed_config.num_sub_workers", -1, "distributed_config.num_sub_workers"),
    (2, "distributed_config.num_sub_workers", False, "distributed_config.num_sub_workers"),
    (2, "distributed_config.runtime", 7, "distributed_config.runtime"),
    (2, "distributed_config.runtime", None, "distributed_config.runtime"),
    (2, "distributed_config.aicpu_thread_num", 1, "distributed_config.aicpu_thread_num"),
    (2, "distributed_config.aicpu_thread_num", -2, "distributed_config.aicpu_thread_num"),
    (2, "distributed_config.aicpu_thread_num", True, "distributed_config.aicpu_thread_num"),
]


@pytest.mark.parametrize("schema,dotted,value,field", FIELD_ERRORS,
                         ids=[f"{s}-{d}-{v!r}" for s, d, v, _ in FIELD_ERRORS])
def test_field_rejected(schema: int, dotted: str, value: Any, field: str) -> None:
    base, path, name = (L2, P1, "compiled_meta.json") if schema == 1 else (L3, P2, "distributed_meta.json")
    with pytest.raises(MetaError) as info:
        parse(_set(base, dotted, value), schema)
    msg = str(info.value)
    assert isinstance(info.value, ValueError) and "\n" not in msg
    assert msg.startswith(f"Invalid {name} in {path}: {field}: "), msg
    assert msg.endswith(TAIL)


def test_valid_config_edges() -> None:
    obj = _set(_set(L3, "distributed_config.aicpu_thread_num", 2), "distributed_config.num_sub_workers", 3)
    dc = parse(obj, 2).distributed_config
    assert dc == DistributedConfigMeta((0, 1), 3, "tensormap_and_ringbuffer", 2)
    assert parse(_set(L3, "distributed_config", {}), 2).distributed_config == DistributedConfigMeta((0,))


def test_check_order_params_before_backend() -> None:
    obj = _set(_set(L2, "backend_type", "nope"), "params.0.dtype", "nope")
    with pytest.raises(MetaError, match=r": params\[0\]\.dtype: "):
        parse(obj)


def test_every_dtype_accepted() -> None:
    names = ("bool int4 int8 int16 int32 int64 uint4 uint8 uint16 uint32 uint64 fp4 fp8e4m3fn fp8e5m2 "
             "fp8e8m0 fp16 fp32 bfloat16 hf4 hf8 index task_id").split()
    obj = dict(L2, params=[{"name": f"p{i}", "direction": "In", "shape": None, "dtype": d}
                           for i, d in enumerate(names)])
    assert [p.dtype for p in parse(obj).params] == names


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=6)
    | st.sampled_from(["In", "Out", "fp32", "Ascend950", "device_ids"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["name", "direction", "shape", "dtype", "schema", "params", "device_ids", "x"]),
        inner, max_size=4),
    max_leaves=12)
PATHS = ["schema", "params", "params.0", "params.0.name", "params.1.direction", "params.1.shape",
         "params.2.dtype", "num_return_types", "platform", "backend_type", "distributed_config",
         "distributed_config.device_ids", "distributed_config.runtime", "distributed_config.aicpu_thread_num",
         "distributed_config.num_sub_workers", "distributed_config.other"]


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.sampled_from([1, 2]), st.lists(st.tuples(st.sampled_from(PATHS), json_values | st.just(...)),
                                         max_size=3), st.text(max_size=40))
def test_fuzz_never_other_exceptions(schema: int, edits: list, junk: str) -> None:
    obj: Any = copy.deepcopy(L3)
    obj["schema"] = schema
    for dotted, value in edits:
        try:
            obj = _set(obj, dotted, value)
        except (KeyError, IndexError, TypeError, ValueError):
            pass  # the edit does not apply to the already-mutated object
    for text in (json.dumps(obj), junk, json.dumps(obj)[: len(junk)]):
        try:
            m = parse_meta(text, P2, schema=schema)
        except MetaError as exc:
            assert "\n" not in str(exc)
        else:
            assert parse_meta(dump_meta(m), P2, schema=schema) == m
