"""Synthetic PyPTO-style build directories, for tests, benchmarks and the example.

Each generated directory has exactly the shape PyPTO writes (single-chip L2,
L3 distributed, multi-orch parent; see the PyPTO build-output reference, sections
1.2-1.4, 2, 3, 4 and 5.1): `kernel_config.py`
in the generated format (TAB indentation), `compiled_meta.json` /
`distributed_meta.json`, `orchestration/<name>.cpp` and kernel wrappers
`kernels/<aic|aiv>/<name>.cpp` framed by the ptoas sentinels. Kernel bodies are
plain C++ (no PTO-ISA), so the whole directory compiles and runs on the `host`
platform.

The program of an L2 directory is `main(a: In[size] fp32, out: Out[size] fp32)`.
Kernel `func_id` k is `<orch>_incore_<k>_<aic|aiv>` (even ids on AIC, odd on
AIV) and is called as `(a, out, n)`:

* k = 0:  out = a * 1
* k >= 1: out = out * 0.5 + a * (k + 1)

so the result is well defined and `golden.py` reproduces it exactly in torch.

With `pto=True` a directory also has PyPTO's `ptoas/` stage (section 5). The
kernel sources (naming, wrappers, ptoas/ units) are written by
`pypto_build.testing.synth_kernels`, whose public names are re-exported here. The standard
library and the marker file names (`builddir.markers`) only.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..builddir.markers import (COMPILED_META, DISTRIBUTED_META, GOLDEN_PY, HOST_ORCH, KERNEL_CONFIG, NEXT_LEVELS,
                                ORCHESTRATION_DIR)
from .synth_golden import GOLDEN_SEED, golden_l2, golden_l3
from .synth_kernels import (BEGIN_SENTINEL, END_SENTINEL, core_type, kernel_name, kernel_path, pto_path,
                            pto_units, write_kernels, write_text)

__all__ = ["write_l2", "write_l3", "write_multi_orch", "kernel_path", "kernel_name", "core_type", "pto_path",
           "pto_units", "BEGIN_SENTINEL", "END_SENTINEL", "GOLDEN_SEED"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


# ---------------------------------------------------------------------------
# L2 sub-build
# ---------------------------------------------------------------------------


def write_l2(
    root: Path,
    *,
    kernels: int = 3,
    orch_name: str = "main",
    header_every: int = 2,
    golden: bool = False,
    size: int = 16,
    intermediate: bool = False,
    pto: bool = False,
) -> Path:
    """Write a complete single-chip (L2) build directory at `root`; return `root`.

    kernels:      number of kernels (func_id 0..kernels-1, alternating aic/aiv).
    header_every: kernels with func_id % header_every == 0 include
                  "../common.h" (kernels/common.h); 0 = none.
    golden:       also write golden.py (inputs from a fixed torch seed).
    size:         element count of the fp32 tensors `a` and `out`.
    intermediate: kernel 0 first writes a runtime-allocated intermediate
                  (TensorCreateInfo), then is run again to copy it to `out`;
                  the result is unchanged.
    pto:          also write the ptoas/ stage (.pto + raw .cpp per unit; kernels
                  0 and 1 share the group unit `<orch>_group`).
    """
    root = Path(root)
    _write_chip(
        root,
        orch_name=orch_name,
        kernels=kernels,
        header_every=header_every,
        size=size,
        intermediate=intermediate,
        pto=pto,
    )
    write_text(root / COMPILED_META, _compiled_meta(size))
    if golden:
        write_text(root / GOLDEN_PY, golden_l2(kernels, size))
    return root


def _write_chip(root: Path, *, orch_name: str, kernels: int, header_every: int, size: int, intermediate: bool,
                pto: bool = False) -> None:
    if not _IDENT.match(orch_name):
        raise ValueError(f"orch_name must be a C identifier, got {orch_name!r}")
    if kernels < 1:
        raise ValueError(f"kernels must be >= 1, got {kernels}")
    if header_every < 0:
        raise ValueError(f"header_every must be >= 0, got {header_every}")
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    write_text(root / KERNEL_CONFIG, _kernel_config(orch_name, kernels))
    write_text(root / ORCHESTRATION_DIR / f"{orch_name}.cpp", _orchestration_cpp(orch_name, kernels, intermediate))
    headers = [header_every > 0 and func_id % header_every == 0 for func_id in range(kernels)]
    write_kernels(root, orch_name, headers, pto=pto)


def _kernel_signature(func_id: int) -> str:
    return "[_D.IN, _D.OUT]" if func_id == 0 else "[_D.IN, _D.INOUT]"


def _kernel_config(orch_name: str, kernels: int) -> str:
    lines = [
        "# Kernel and Orchestration Configuration\n",
        "from pathlib import Path\n",
        "from simpler.task_interface import ArgDirection as _D\n",
        "_ROOT_DIR = Path(__file__).parent\n",
        "# Runtime configuration for tensormap_and_ringbuffer.",
        "# AICPU thread count 0 selects the runtime's architecture default (a2a3: 4; a5: 5).",
        "RUNTIME_CONFIG = {",
        '\t"runtime": "tensormap_and_ringbuffer",',
        '\t"aicpu_thread_num": 0,',
        "}\n",
        "ORCHESTRATION = {",
        f'\t"source": str(_ROOT_DIR / "orchestration" / "{orch_name}.cpp"),',
        '\t"function_name": "aicpu_orchestration_entry",',
        '\t"signature": [_D.IN, _D.OUT],',
        "}\n",
        "KERNELS = [",
    ]
    for func_id in range(kernels):
        name = kernel_name(orch_name, func_id)
        core = core_type(func_id)
        lines.append(
            f'\t{{"func_id": {func_id}, "name": "{name}", '
            f'"source": str(_ROOT_DIR / "kernels" / "{core}" / "{name}.cpp"), '
            f'"core_type": "{core}", "signature": {_kernel_signature(func_id)}}},'
        )
    lines.append("]")
    return "\n".join(lines) + "\n"


def _orchestration_cpp(orch_name: str, kernels: int, intermediate: bool) -> str:
    out = [
        f"// Orchestration Function: {orch_name}",
        "// Generated by PyPTO IR Compiler",
        "",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <stdio.h>",
        "",
        '#include "pto_orchestration_api.h"',
        "",
        'extern "C" {',
        "",
        '__attribute__((visibility("default")))',
        "PTO2OrchestrationConfig aicpu_orchestration_config(const ChipTaskArgs& orch_args) {",
        "    (void)orch_args;",
        "    return PTO2OrchestrationConfig{",
        "        .expected_arg_count = 2,",
        "    };",
        "}",
        "",
        '__attribute__((visibility("default")))',
        "void aicpu_orchestration_entry(const ChipTaskArgs& orch_args) {",
        "    // External tensors",
        "    const ChipTensor& ext_a = orch_args.tensor(0).ref();",
        "    const ChipTensor& ext_out = orch_args.tensor(1).ref();",
        "",
        "    // Element count of a",
        "    int64_t n = 1;",
        "    for (uint32_t d = 0; d < ext_a.ndims; ++d) {",
        "        n *= static_cast<int64_t>(ext_a.shapes[d]);",
        "    }",
        "",
        "    PTO2_SCOPE() {",
    ]
    task = 0

    def submit(func_id: int, inputs: str, output_call: str, keep: str | None = None) -> None:
        nonlocal task
        core = core_type(func_id)
        p = f"params_t{task}"
        out.append(f"        // Task {task}: {kernel_name(orch_name, func_id)}")
        out.append(f"        CoreTaskArgs {p};")
        out.append(f"        {p}.add_input({inputs});")
        out.append(f"        {p}.{output_call};")
        out.append(f"        {p}.add_scalar(n);")
        call = f"rt_submit_{core}_task({func_id}, {p});"
        out.append(f"        TaskOutputTensors {keep} = {call}" if keep else f"        {call}")
        task += 1

    if intermediate:
        out.append("        TensorCreateInfo tmp_ci(ext_a.shapes, ext_a.ndims, DataType::FLOAT32);")
        submit(0, "ext_a", "add_output(tmp_ci)", keep="outs_t0")
        out.append("        const ChipTensor& tmp = outs_t0.get_ref(0);")
        out.append("")
        submit(0, "tmp", "add_output(ext_out)")
    else:
        submit(0, "ext_a", "add_output(ext_out)")
    for func_id in range(1, kernels):
        out.append("")
        submit(func_id, "ext_a", "add_inout(ext_out)")
    out += [
        "    }",
        "}",
        "",
        '}  // extern "C"',
    ]
    return "\n".join(out) + "\n"


def _param(name: str, direction: str, shape: list[int]) -> dict:
    return {"name": name, "direction": direction, "shape": shape, "dtype": "fp32"}


def _compiled_meta(size: int) -> str:
    meta = {
        "schema": 1,
        "params": [_param("a", "In", [size]), _param("out", "Out", [size])],
        "num_return_types": 1,
        "platform": "a2a3sim",
        "backend_type": "Ascend910B",
    }
    return json.dumps(meta, indent=2)


# ---------------------------------------------------------------------------
# L3 and multi-orch parents
# ---------------------------------------------------------------------------


def write_l3(
    root: Path,
    *,
    chips: tuple[str, ...] = ("chip_a", "chip_b"),
    kernels: int = 2,
    device_ids: tuple[int, ...] = (0, 1),
    pto: bool = False,
    golden: bool = False,
) -> Path:
    """Write an L3 (distributed) build directory at `root`; return `root`.

    Root: `distributed_meta.json` (schema 2) and `orchestration/host_orch.py`
    in the shape PyPTO's distributed codegen emits for a comm-free program
    (its imports, the `(orch, _args, config, *, tensors, callables, sub_ids,
    _keep, world_size, _domain_provider=None)` entry marked
    `_pypto_distributed_entry = True`, `_alloc_intermediates`, per-rank views
    into `tensors`, one `TaskArgs` per dispatch, `_submit_chip(..., rank)`),
    no top-level kernel_config.py / compiled_meta.json. One sub-build per chip
    under `next_levels/<chip>/`, each like `write_l2` (orchestration named
    after the chip) but without compiled_meta.json. Params `a`, `out` are
    [world, 16]; rank r runs the chips in sequence on row r: chip 0 reads
    `a`, chip i > 0 reads the shared intermediate `mid_<i-1>`, the last chip
    writes `out`. `pto` as in `write_l2`, for every chip; `golden` also
    writes golden.py (fixed-seed inputs, the expected `out`).
    """
    root = Path(root)
    chips = tuple(chips)
    device_ids = tuple(device_ids)
    if not chips or len(set(chips)) != len(chips):
        raise ValueError(f"chips must be non-empty and distinct, got {chips!r}")
    if not device_ids or len(set(device_ids)) != len(device_ids) or any(d < 0 for d in device_ids):
        raise ValueError(f"device_ids must be non-empty, distinct and >= 0, got {device_ids!r}")
    size = 16
    for chip in chips:
        _write_chip(root / NEXT_LEVELS / chip, orch_name=chip, kernels=kernels, header_every=2, size=size,
                    intermediate=False, pto=pto)
    world = len(device_ids)
    meta = {
        "schema": 2,
        "params": [_param("a", "In", [world, size]), _param("out", "Out", [world, size])],
        "num_return_types": 1,
        "platform": "a2a3sim",
        "backend_type": "Ascend910B",
        "distributed_config": {
            "device_ids": list(device_ids),
            "num_sub_workers": 0,
            "runtime": "tensormap_and_ringbuffer",
            "aicpu_thread_num": 0,
        },
    }
    write_text(root / DISTRIBUTED_META, json.dumps(meta, indent=2))
    write_text(root / HOST_ORCH, _host_orch_py(chips, world, size))
    if golden:
        write_text(root / GOLDEN_PY, golden_l3(len(chips), kernels, world, size))
    return root


def _host_orch_py(chips: tuple[str, ...], world: int, size: int) -> str:
    lines = [
        "import torch",
        "from simpler.task_interface import CallConfig, CommBufferSpec, DataType, TaskArgs, TensorArgType",
        "from pypto.runtime.tensor_arg import make_tensor_arg",
        "from pypto.runtime.distributed_runner import _submit_chip",
        "",
        "def _alloc_intermediates(tensors, world_size=1):",
    ]
    for i in range(len(chips) - 1):
        lines.append(f'    tensors["mid_{i}"] = torch.zeros(({world}, {size}), dtype=torch.float32).share_memory_()')
    if len(chips) == 1:
        lines.append("    return None")
    lines += [
        "",
        "def host_orch(orch, _args, config, *, tensors, callables, sub_ids, _keep, world_size, _domain_provider=None):",
        "    t__tmp_v0 = world_size",
        "    for rank__idx_v0 in range(0, t__tmp_v0, 1):",
    ]
    tmp = 1
    for i, chip in enumerate(chips):
        src = "a" if i == 0 else f"mid_{i - 1}"
        dst = "out" if i == len(chips) - 1 else f"mid_{i}"
        ta = f"_ta_{i}"
        lines += [
            f'        tensors["t__tmp_v{tmp}"] = tensors["{src}"][rank__idx_v0, 0:{size}]',
            f'        tensors["t__tmp_v{tmp + 1}"] = tensors["{dst}"][rank__idx_v0, 0:{size}]',
            f"        {ta} = TaskArgs()",
            f'        {ta}.add_tensor(make_tensor_arg(orch._worker, tensors["t__tmp_v{tmp}"]), TensorArgType.INPUT)',
            f'        {ta}.add_tensor(make_tensor_arg(orch._worker, tensors["t__tmp_v{tmp + 1}"]), '
            "TensorArgType.OUTPUT_EXISTING)",
            f"        _keep.append({ta})",
            f'        _submit_chip(orch, callables["{chip}"], {ta}, config, rank__idx_v0)',
        ]
        tmp += 2
    lines += ["", "host_orch._pypto_distributed_entry = True", ""]
    return "\n".join(lines) + "\n"


def write_multi_orch(
    root: Path,
    *,
    orchs: tuple[str, ...] = ("orch_a", "orch_b"),
    kernels: int = 2,
    pto: bool = False,
    golden: bool = False,
) -> Path:
    """Write a multi-orch L2 parent at `root`; return `root`.

    No top-level markers; each `next_levels/<orch>/` is a complete L2
    sub-build written by `write_l2` (with its own compiled_meta.json);
    `pto` and `golden` as in `write_l2`.
    """
    root = Path(root)
    orchs = tuple(orchs)
    if not orchs or len(set(orchs)) != len(orchs):
        raise ValueError(f"orchs must be non-empty and distinct, got {orchs!r}")
    for orch in orchs:
        write_l2(root / NEXT_LEVELS / orch, kernels=kernels, orch_name=orch, pto=pto, golden=golden)
    return root

