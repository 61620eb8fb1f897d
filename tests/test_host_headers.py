"""The host runtime headers: ChipTensor layout, the orchestration API and its binding.

Compiles small programs with the host compiler (the same command lines the
`host` platform uses) and drives them through ctypes.
"""
from __future__ import annotations

import ctypes
import importlib.util
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from pypto_build.testing import synth
from pypto_build.platforms.host.runtime.abi import (ABI_VERSION, ADDRESS_SPACE_DEVICE, ALLOC_FN, ARG_ROLES,
                                                    CORE_TYPES, EXTERNAL_TASK_ID, IS_FATAL_FN, LOG_FN, LOG_LEVEL_NAMES,
                                                    MAX_TENSOR_DIMS, REPORT_FATAL_FN, SCOPE_FN, SUBMIT_FN,
                                                    ChipTaskArgs, ChipTensor, DataType, PTO2OrchestrationConfig,
                                                    PTO2RuntimeOps, aligned_tensors, fill_from_torch)
from pypto_build.platforms.host.platform import HOST_FALLBACK, HOST_INCLUDE

INCLUDE, FALLBACK = HOST_INCLUDE, HOST_FALLBACK
CXX = shutil.which("g++")

pytestmark = pytest.mark.skipif(CXX is None, reason="no g++ on PATH: the host headers cannot be compiled")

# simpler's `ChipTensor` layout, as its runtime header declares it: (field, offset, size).
EXPECTED_LAYOUT = [
    ("buffer.addr", 0, 8),
    ("buffer.size", 8, 8),
    ("owner_task_id", 16, 8),
    ("start_offset", 24, 8),
    ("version", 32, 4),
    ("ndims", 36, 4),
    ("dtype", 40, 1),
    ("manual_dep", 41, 1),
    ("is_contiguous", 42, 1),
    ("address_space", 43, 1),
    ("shapes", 44, 20),
    ("extent_elem_cache", 64, 8),
    ("strides", 72, 20),
    ("padding", 92, 36),
]
DTYPES = [
    "FLOAT32", "FLOAT16", "INT32", "INT16", "INT8", "UINT8", "BFLOAT16", "INT64", "UINT64",
    "UINT16", "UINT32", "BOOL", "FP8E4M3FN", "FP8E8M0", "FP4E2M1",
]


def kernel_cmd(core: str, src: str, out: str, *, define: bool = True) -> list[str]:
    cmd = [CXX, "-shared", "-fPIC", "-O2", "-std=c++17", "-fpermissive", "-Wno-ignored-attributes",
           "-D__CPU_SIM", "-DPTO_CPU_MAX_THREADS=1", "-DNDEBUG"]
    if define:
        cmd.append("-D__DAV_VEC__" if core == "aiv" else "-D__DAV_CUBE__")
    return cmd + [f"-I{INCLUDE}", f"-I{FALLBACK}", "-o", out, src]


def orch_cmd(src: str, out: str) -> list[str]:
    return [CXX, "-shared", "-fPIC", "-O2", "-g", "-std=c++17", "-Wl,--build-id=sha1", "-pthread",
            f"-I{INCLUDE}", "-o", out, src]


def run(cmd: list[str], cwd: Path) -> None:
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"


def describe_1d(rec: ChipTensor, addr: int, elems: int) -> None:
    """A 1-D fp32 external tensor of `elems` elements at `addr` (no torch needed)."""
    rec.addr, rec.size, rec.owner_task_id = addr, elems * 4, EXTERNAL_TASK_ID
    rec.start_offset, rec.ndims, rec.dtype, rec.is_contiguous = 0, 1, DataType.FLOAT32, 1
    rec.shapes[0], rec.strides[0], rec.extent_elem_cache = elems, 1, elems


class Recorder:
    """A PTO2RuntimeOps table that records every call (and optionally runs kernels)."""

    def __init__(self, kernels: dict[int, tuple[str, ctypes.CDLL]] | None = None):
        self.kernels = kernels or {}
        self.events: list[tuple] = []
        self.fatal: list[tuple] = []
        self.errors: list[BaseException] = []
        self._keep: list[object] = []
        self.ops = PTO2RuntimeOps(
            ABI_VERSION, ctypes.sizeof(PTO2RuntimeOps), None, SUBMIT_FN(self._submit), SCOPE_FN(self._begin),
            SCOPE_FN(self._end), ALLOC_FN(self._alloc), IS_FATAL_FN(lambda _c: int(bool(self.fatal))),
            REPORT_FATAL_FN(self._report), LOG_FN(self._log))

    def _submit(self, _ctx, core, func_id, tensors, types, n, scalars, m):
        # An exception raised inside a ctypes callback is printed and swallowed: keep it for the test.
        try:
            return self._run_task(core, func_id, tensors, types, n, scalars, m)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(exc)
            return -1

    def _run_task(self, core, func_id, tensors, types, n, scalars, m):
        recs = [ChipTensor.from_buffer_copy(ctypes.string_at(tensors[i], 128)) for i in range(n)]
        raw = [scalars[j] for j in range(m)]
        self.events.append(("submit", core, func_id, [types[i] for i in range(n)], raw))
        if func_id in self.kernels:
            want_core, lib = self.kernels[func_id]
            if want_core != CORE_TYPES[core]:
                raise AssertionError(f"func_id {func_id} submitted on core {core}, config says {want_core}")
            args = (ctypes.c_int64 * (n + m))()
            for i, rec in enumerate(recs):
                args[i] = ctypes.addressof(rec)
            for j, bits in enumerate(raw):
                args[n + j] = ctypes.c_int64(bits).value
            lib.kernel_entry(args)
        return len(self.events)

    def _begin(self, _ctx):
        self.events.append(("scope_begin",))

    def _end(self, _ctx):
        self.events.append(("scope_end",))

    def _alloc(self, _ctx, recs, count):
        for i in range(count):
            buf = ctypes.create_string_buffer(recs[i].size)
            self._keep.append(buf)
            recs[i].addr = ctypes.addressof(buf)
            self.events.append(("alloc", recs[i].ndims, list(recs[i].shapes), recs[i].size, recs[i].dtype))
        return 0

    def _report(self, _ctx, code, func, msg):
        self.fatal.append((code, func.decode(), msg.decode()))

    def _log(self, _ctx, level, func, msg):
        self.events.append(("log", level, func.decode(), msg.decode()))


def load_orch(so: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    lib.pto_host_runtime_abi_version.restype = ctypes.c_uint32
    lib.pto_host_bind_runtime.restype = ctypes.c_int32
    lib.pto_host_bind_runtime.argtypes = [ctypes.c_void_p]
    lib.aicpu_orchestration_entry.argtypes = [ctypes.POINTER(ChipTaskArgs)]
    lib.aicpu_orchestration_entry.restype = None
    lib.aicpu_orchestration_config.argtypes = [ctypes.POINTER(ChipTaskArgs)]
    lib.aicpu_orchestration_config.restype = PTO2OrchestrationConfig
    return lib


# ---------------------------------------------------------------------------
# tensor.h
# ---------------------------------------------------------------------------

LAYOUT_PROGRAM = r"""
#include <cstdio>
#include "tensor.h"
static_assert(sizeof(ChipTensor) == 128, "size");
static_assert(offsetof(ChipTensor, strides) == 72, "strides");
#define FIELD(f) std::printf(#f " %zu %zu\n", offsetof(ChipTensor, f), sizeof(ChipTensor::f))
#define DTYPE(d) std::printf("enum_" #d " %d\n", (int)DataType::d)
int main() {
    std::printf("sizeof %zu\nalignof %zu\n", sizeof(ChipTensor), alignof(ChipTensor));
    std::printf("buffer.addr %zu %zu\nbuffer.size %zu %zu\n",
                offsetof(ChipTensor, buffer) + offsetof(PTOBufferHandle, addr), sizeof(PTOBufferHandle::addr),
                offsetof(ChipTensor, buffer) + offsetof(PTOBufferHandle, size), sizeof(PTOBufferHandle::size));
    FIELD(owner_task_id); FIELD(start_offset); FIELD(version); FIELD(ndims); FIELD(dtype); FIELD(manual_dep);
    FIELD(is_contiguous); FIELD(address_space); FIELD(shapes); FIELD(extent_elem_cache); FIELD(strides);
    FIELD(padding);
    std::printf("trivially_copyable %d\n", (int)std::is_trivially_copyable<ChipTensor>::value);
    std::printf("MAX_TENSOR_DIMS %u\n", MAX_TENSOR_DIMS);
    std::printf("PTO2_EXTERNAL_TASK_ID %llu\n", (unsigned long long)PTO2_EXTERNAL_TASK_ID);
    std::printf("AddressSpace::DEVICE %d\n", (int)AddressSpace::DEVICE);
    %DTYPES%
    std::printf("dtype_size %zu\n", sizeof(DataType));
    return 0;
}
""".replace("%DTYPES%", " ".join(f"DTYPE({name});" for name in DTYPES))


def compile_and_run(tmp_path: Path, source: str) -> dict[str, list[int]]:
    """Build `source` against the host headers (-Wall -Werror), run it, parse its `key value...` lines."""
    (tmp_path / "probe.cpp").write_text(source)
    run([CXX, "-std=c++17", "-O0", "-Wall", "-Werror", f"-I{INCLUDE}", "-o", "probe", "probe.cpp"], tmp_path)
    out = subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True).stdout
    values: dict[str, list[int]] = {}
    for line in out.splitlines():
        key, *nums = line.split(" ")
        assert key not in values, key
        values[key] = [int(n) for n in nums]
    return values


def test_chip_tensor_layout_matches_the_runtime(tmp_path):
    """tensor.h against the documented layout and against the package's ctypes mirror (runtime/abi.py)."""
    values = compile_and_run(tmp_path, LAYOUT_PROGRAM)
    assert values["sizeof"] == [128] == [ctypes.sizeof(ChipTensor)]
    assert values["alignof"] == [64]  # the mirror is packed; aligned_tensors supplies the alignment
    assert values["trivially_copyable"] == [1]
    assert values["MAX_TENSOR_DIMS"] == [5] == [MAX_TENSOR_DIMS]
    assert values["PTO2_EXTERNAL_TASK_ID"] == [2**64 - 1] == [EXTERNAL_TASK_ID]
    assert values["AddressSpace::DEVICE"] == [1] == [ADDRESS_SPACE_DEVICE]
    for field, offset, size in EXPECTED_LAYOUT:
        mirror = getattr(ChipTensor, field.split(".")[-1])  # buffer.addr is flattened to addr
        assert values[field] == [offset, size] == [mirror.offset, mirror.size], field
    mirror_fields = [f for f, _ in ChipTensor._fields_]
    assert [f for f, *_ in EXPECTED_LAYOUT] == ["buffer.addr", "buffer.size"] + mirror_fields[2:]  # all probed
    assert [values[f"enum_{name}"] for name in DTYPES] == [[v] for v in range(len(DTYPES))]
    assert [(d.name, d.value) for d in DataType] == [(name, v) for v, name in enumerate(DTYPES)]
    assert values["dtype_size"] == [1]


def test_ctypes_mirror_matches_the_documented_layout():
    assert ctypes.sizeof(ChipTensor) == 128
    for field, offset, size in EXPECTED_LAYOUT:
        name = field.split(".")[-1]
        assert getattr(ChipTensor, name).offset == offset, field
        assert getattr(ChipTensor, name).size == size, field
    recs, raw = aligned_tensors(3)
    assert len(recs) == 3 and ctypes.addressof(recs) % 64 == 0
    assert ctypes.addressof(raw) <= ctypes.addressof(recs)
    assert ctypes.addressof(recs) + 3 * 128 <= ctypes.addressof(raw) + ctypes.sizeof(raw)
    assert ctypes.string_at(ctypes.addressof(recs), 3 * 128) == bytes(3 * 128)


def test_tensor_header_includes_only_cheap_headers():
    text = (INCLUDE / "tensor.h").read_text()
    assert re.findall(r"#include\s*<([^>]+)>", text) == ["cstddef", "cstdint", "type_traits"]
    assert 'include "' not in text
    assert "pypto_build" in text.split("\n\n")[0]  # header comment names its author


def test_fallback_pto_inst_is_a_labelled_empty_namespace(tmp_path):
    text = (FALLBACK / "pto" / "pto-inst.hpp").read_text()
    assert "STAND-IN" in text and "namespace pto {}" in text
    (tmp_path / "k.cpp").write_text(
        "#include <pto/pto-inst.hpp>\nusing namespace pto;\n"
        "#ifndef PYPTO_BUILD_PTO_ISA_STAND_IN\n#error stand-in not used\n#endif\n"
        'extern "C" int probe() { return 7; }\n'
    )
    run(kernel_cmd("aiv", "k.cpp", "k.so"), tmp_path)


# ---------------------------------------------------------------------------
# pto_orchestration_api.h
# ---------------------------------------------------------------------------

API_LAYOUT_PROGRAM = r"""
#include <cstdio>
#include "pto_orchestration_api.h"
#define OPS(f) std::printf(#f " %zu %zu\n", offsetof(PTO2RuntimeOps, f), sizeof(PTO2RuntimeOps::f))
#define ARGS(f) std::printf(#f " %zu %zu\n", offsetof(ChipTaskArgs, f##_), sizeof(ChipTaskArgs::f##_))
#define CONST(c) std::printf(#c " %d\n", (int)c)
int main() {
    std::printf("sizeof_ops %zu\nsizeof_args %zu\nsizeof_config %zu\n", sizeof(PTO2RuntimeOps),
                sizeof(ChipTaskArgs), sizeof(PTO2OrchestrationConfig));
    OPS(abi_version); OPS(struct_size); OPS(ctx); OPS(submit_task); OPS(scope_begin); OPS(scope_end);
    OPS(alloc_tensors); OPS(is_fatal); OPS(report_fatal); OPS(log);
    ARGS(tensors); ARGS(scalars); ARGS(tensor_count); ARGS(scalar_count);
    std::printf("expected_arg_count %zu %zu\n", offsetof(PTO2OrchestrationConfig, expected_arg_count),
                sizeof(PTO2OrchestrationConfig::expected_arg_count));
    std::printf("PTO_HOST_RUNTIME_ABI_VERSION %u\n", PTO_HOST_RUNTIME_ABI_VERSION);
    CONST(PTO_HOST_CORE_AIC); CONST(PTO_HOST_CORE_AIV);
    CONST(PTO_HOST_ARG_INPUT); CONST(PTO_HOST_ARG_OUTPUT); CONST(PTO_HOST_ARG_INOUT);
    CONST(PTO_HOST_ARG_OUTPUT_EXISTING); CONST(PTO_HOST_ARG_NO_DEP);
    CONST(PTO_HOST_LOG_DEBUG); CONST(PTO_HOST_LOG_INFO); CONST(PTO_HOST_LOG_WARN); CONST(PTO_HOST_LOG_ERROR);
    CONST(PTO_HOST_LOG_ALWAYS);
    return 0;
}
"""


def test_api_mirror_matches_the_header(tmp_path):
    """PTO2RuntimeOps, ChipTaskArgs, PTO2OrchestrationConfig and the enum maps of runtime/abi.py."""
    values = compile_and_run(tmp_path, API_LAYOUT_PROGRAM)
    for key, struct_type in (("ops", PTO2RuntimeOps), ("args", ChipTaskArgs), ("config", PTO2OrchestrationConfig)):
        assert values[f"sizeof_{key}"] == [ctypes.sizeof(struct_type)], key
        for name, _type in struct_type._fields_:
            mirror = getattr(struct_type, name)
            assert values[name] == [mirror.offset, mirror.size], f"{struct_type.__name__}.{name}"
    assert len(PTO2RuntimeOps._fields_) == 10 and len(ChipTaskArgs._fields_) == 4  # nothing left unprobed
    assert values["PTO_HOST_RUNTIME_ABI_VERSION"] == [ABI_VERSION]
    assert CORE_TYPES == {values["PTO_HOST_CORE_AIC"][0]: "aic", values["PTO_HOST_CORE_AIV"][0]: "aiv"}
    assert ARG_ROLES == {
        values["PTO_HOST_ARG_INPUT"][0]: "in", values["PTO_HOST_ARG_OUTPUT"][0]: "out",
        values["PTO_HOST_ARG_INOUT"][0]: "inout", values["PTO_HOST_ARG_OUTPUT_EXISTING"][0]: "out",
        values["PTO_HOST_ARG_NO_DEP"][0]: "no_dep"}
    assert LOG_LEVEL_NAMES == {values[f"PTO_HOST_LOG_{name.upper()}"][0]: name
                          for name in ("debug", "info", "warn", "error", "always")}


API_PROGRAM = r"""
#include "pto_orchestration_api.h"
static CoreTaskArgs next_never_submitted_args() { return CoreTaskArgs{}; }
enum class Mode : int32_t { A = 3, B = -2 };
extern "C" void aicpu_orchestration_entry(const ChipTaskArgs& orch_args) {
    const ChipTensor& x = orch_args.tensor(0).ref();
    LOG_INFO("tensors=%u scalars=%u first=%llu", orch_args.tensor_count(), orch_args.scalar_count(),
             (unsigned long long)orch_args.scalar(0));
    PTO2_SCOPE() {
        CoreTaskArgs args;
        args.add_input(x);
        uint32_t shape[2] = {3, 4};
        args.add_output(TensorCreateInfo(shape, 2, DataType::INT16));
        args.add_inout(x);
        args.add_scalar(1.5f);
        args.add_scalar(-2);
        args.add_scalar(2.5);
        args.add_scalar(Mode::B);
        args.add_scalar(true);
        args.add_scalar(uint64_t(0xFFFFFFFFFFFFFFFFull));
        TaskOutputTensors outs = rt_submit_aiv_task(7, args);
        const ChipTensor& made = outs.get_ref(0);
        PTO2_SCOPE() {
            CoreTaskArgs next;
            next.add_input(made);
            rt_submit_aic_task(8, next);
        }
        TaskOutputTensors extra = alloc_tensors(TensorCreateInfo(shape, 1));
        CoreTaskArgs bad;
        bad.add_scalar(1);
        bad.add_input(extra.get_ref(0));  // tensor after scalar: reported, never submitted
        rt_submit_aiv_task(9, bad);
        rt_submit_aiv_task(10, next_never_submitted_args());
    }
}
extern "C" PTO2OrchestrationConfig aicpu_orchestration_config(const ChipTaskArgs&) {
    return PTO2OrchestrationConfig{.expected_arg_count = 1};
}
"""


def test_orchestration_api_calls_through_the_bound_ops(tmp_path):
    (tmp_path / "orch.cpp").write_text(API_PROGRAM)
    run(orch_cmd("orch.cpp", "orch.so"), tmp_path)
    lib = load_orch(tmp_path / "orch.so")
    assert lib.pto_host_runtime_abi_version() == ABI_VERSION == 1

    rec = Recorder()
    assert lib.pto_host_bind_runtime(ctypes.byref(rec.ops)) == 0
    tensors, _raw = aligned_tensors(1)
    data = (ctypes.c_float * 8)()
    describe_1d(tensors[0], ctypes.addressof(data), 8)
    scalars = (ctypes.c_uint64 * 1)(42)
    args = ChipTaskArgs(ctypes.addressof(tensors), ctypes.addressof(scalars), 1, 1)
    assert lib.aicpu_orchestration_config(ctypes.byref(args)).expected_arg_count == 1
    lib.aicpu_orchestration_entry(ctypes.byref(args))

    f15 = int.from_bytes(struct.pack("<f", 1.5), "little")
    d25 = int.from_bytes(struct.pack("<d", 2.5), "little")
    assert rec.events == [
        ("log", 1, "aicpu_orchestration_entry", "tensors=1 scalars=1 first=42"),
        ("scope_begin",),
        ("alloc", 2, [3, 4, 0, 0, 0], 24, 3),  # INT16 = 3, 12 elements * 2 bytes
        ("submit", 1, 7, [0, 1, 2], [f15, 2**64 - 2, d25, 2**64 - 2, 1, 2**64 - 1]),
        ("scope_begin",),
        ("submit", 0, 8, [0], []),
        ("scope_end",),
        ("alloc", 1, [3, 0, 0, 0, 0], 12, 0),
        ("scope_end",),
    ]
    # The bad task was reported (tensor after scalar) and nothing after it was submitted.
    assert not rec.errors
    assert len(rec.fatal) == 1 and "tensors must come first" in rec.fatal[0][2]


def test_orchestration_reports_out_of_range_tensor(tmp_path):
    sub = synth.write_l2(tmp_path / "b", kernels=1)
    run(orch_cmd("orchestration/main.cpp", "orchestration/main.so"), sub)
    lib = load_orch(sub / "orchestration" / "main.so")
    rec = Recorder()
    assert lib.pto_host_bind_runtime(ctypes.byref(rec.ops)) == 0
    tensors, _raw = aligned_tensors(1)
    lib.aicpu_orchestration_entry(ctypes.byref(ChipTaskArgs(ctypes.addressof(tensors), None, 1, 0)))
    assert rec.fatal and "tensor(1) out of range" in rec.fatal[0][2]
    assert not [e for e in rec.events if e[0] == "submit"]


def test_bind_rejects_a_mismatched_table(tmp_path):
    sub = synth.write_l2(tmp_path / "b", kernels=1)
    run(orch_cmd("orchestration/main.cpp", "orchestration/main.so"), sub)
    lib = load_orch(sub / "orchestration" / "main.so")
    rec = Recorder()
    rec.ops.abi_version = 99
    assert lib.pto_host_bind_runtime(ctypes.byref(rec.ops)) == -1
    rec.ops.abi_version = ABI_VERSION
    rec.ops.struct_size -= 8  # the header compares struct_size with its sizeof(PTO2RuntimeOps)
    assert lib.pto_host_bind_runtime(ctypes.byref(rec.ops)) == -1
    rec.ops.struct_size = ctypes.sizeof(PTO2RuntimeOps)
    assert lib.pto_host_bind_runtime(ctypes.byref(rec.ops)) == 0
    rec.ops.submit_task = SUBMIT_FN()
    assert lib.pto_host_bind_runtime(ctypes.byref(rec.ops)) == -2
    assert lib.pto_host_bind_runtime(None) == 0
    nm = subprocess.run(["nm", "-D", "--defined-only", str(sub / "orchestration" / "main.so")],
                        capture_output=True, text=True).stdout
    assert "pto_host_bind_runtime" in nm and "aicpu_orchestration_entry" in nm
    assert "pto_host_runtime_ops_" not in nm  # the binding is private to each .so


@pytest.mark.parametrize("intermediate", [False, True])
def test_synth_program_runs_to_its_golden(tmp_path, intermediate):
    """Orchestration + kernels of a synthetic L2 dir, run through the ops table, match golden.py exactly."""
    torch = pytest.importorskip("torch")
    sub = synth.write_l2(tmp_path / "b", kernels=3, golden=True, intermediate=intermediate, size=37)
    kernels = {}
    for func_id in range(3):
        cpp = synth.kernel_path(sub, func_id)
        core = cpp.parent.name
        rel = cpp.relative_to(sub)
        run(kernel_cmd(core, str(rel), str(rel.with_suffix(".so"))), sub)
        lib = ctypes.CDLL(str(cpp.with_suffix(".so")))
        lib.kernel_entry.argtypes = [ctypes.POINTER(ctypes.c_int64)]
        kernels[func_id] = (core, lib)
    run(orch_cmd("orchestration/main.cpp", "orchestration/main.so"), sub)
    lib = load_orch(sub / "orchestration" / "main.so")

    spec = importlib.util.spec_from_file_location("synth_golden", sub / "golden.py")
    golden = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(golden)
    inputs = dict(golden.generate_inputs({"name": "Default"}))
    expected = {k: v.clone() for k, v in inputs.items()}
    golden.compute_golden(expected, {})

    rec = Recorder(kernels)
    assert lib.pto_host_bind_runtime(ctypes.byref(rec.ops)) == 0
    tensors, _raw = aligned_tensors(2)
    for t, name in zip(tensors, ("a", "out")):
        fill_from_torch(t, inputs[name])
    lib.aicpu_orchestration_entry(ctypes.byref(ChipTaskArgs(ctypes.addressof(tensors), None, 2, 0)))
    assert not rec.fatal and not rec.errors
    submits = [(e[1], e[2], e[3]) for e in rec.events if e[0] == "submit"]
    if intermediate:
        assert submits == [(0, 0, [0, 1]), (0, 0, [0, 3]), (1, 1, [0, 2]), (0, 2, [0, 2])]
    else:
        assert submits == [(0, 0, [0, 3]), (1, 1, [0, 2]), (0, 2, [0, 2])]
    torch.testing.assert_close(inputs["out"], expected["out"], rtol=0, atol=0)
    assert golden.__outputs__ == ["out"]
