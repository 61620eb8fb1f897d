"""A PyPTO-style a2a3sim build directory made from simpler's real qwen3_14b_decode kernels.

    <simpler venv>/bin/python bench/real_dir.py DEST

simpler (at the revision PyPTO pins) carries the kernels PyPTO generated for Qwen3-14B's
40-layer decode: `examples/a2a3/tensormap_and_ringbuffer/qwen3_14b_decode/` with
`kernels/aiv/` (16), `kernels/aic/` (18), the generated orchestration
`kernels/orchestration/decode_fwd_layers.cpp`, and the test that declares them
(`test_qwen3_14b_decode.py`: `CALLABLE`, transcribed from PyPTO's `kernel_config.py`).
`write_real_dir` lays those sources out the way PyPTO's `ir.compile` does
(`kernel_config.py` in the generated format, `compiled_meta.json` naming a2a3sim,
`orchestration/<name>.cpp`, `kernels/<core>/<name>.cpp`), so that both pypto_build and
PyPTO's own `compile_and_assemble` build it. The three CANN attention externs of the
`CALLABLE` (sources under `kernels/vendor/`, they need CANN's headers) are left out: the
directory holds the 34 generated kernels and the orchestration.

The test file is read as a syntax tree, never run. Standard library only.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

EXAMPLE = Path("examples") / "a2a3" / "tensormap_and_ringbuffer" / "qwen3_14b_decode"
TEST_FILE = "test_qwen3_14b_decode.py"
CLASS = "TestQwen314BDecode"
CORES = ("aiv", "aic")
PLATFORM = "a2a3sim"
RUNTIME = "tensormap_and_ringbuffer"

# decode_fwd_layers' parameters (simpler_setup/goldens/qwen3_14b_decode.py, generate_inputs, 40 layers):
# name, PyPTO dtype, shape. Only a run reads them; a build needs them well formed.
_B, _H, _KV, _D, _I, _L, _SEQ, _PAGES = 16, 5120, 1024, 128, 17408, 40, 5500, 16 * 43
_ROWS = _PAGES * 8 * 128            # one layer's paged KV pool
PARAMS = (("hidden_states", "bfloat16", [_B, _H]), ("input_rms_weight", "fp32", [_L, _H]),
          ("wq", "bfloat16", [_L * _H, _H]), ("wk", "bfloat16", [_L * _H, _KV]), ("wv", "bfloat16", [_L * _H, _KV]),
          ("q_norm_weight", "fp32", [_L, _D]), ("k_norm_weight", "fp32", [_L, _D]), ("seq_lens", "int32", [_B]),
          ("block_table", "int32", [_PAGES]), ("slot_mapping", "int32", [_B]), ("rope_cos", "fp32", [_SEQ, _D]),
          ("rope_sin", "fp32", [_SEQ, _D]), ("k_cache", "bfloat16", [_L * _ROWS, _D]),
          ("v_cache", "bfloat16", [_L * _ROWS, _D]), ("wo", "bfloat16", [_L * _H, _H]),
          ("w_gate", "bfloat16", [_L * _H, _I]), ("w_up", "bfloat16", [_L * _H, _I]),
          ("w_down", "bfloat16", [_L * _I, _H]), ("post_rms_weight", "fp32", [_L, _H]), ("out", "bfloat16", [_B, _H]))
_DIRECTIONS = {"IN": "In", "OUT": "Out", "INOUT": "InOut"}


@dataclass(frozen=True)
class Kernel:
    """One generated kernel of the example: its func_id, name, core type, signature and source."""

    func_id: int
    name: str
    core_type: str
    signature: tuple[str, ...]      # ArgDirection member names: IN, OUT, INOUT
    source: Path


@dataclass(frozen=True)
class RealProgram:
    """The example's generated program: the orchestration and the kernels under kernels/aiv and kernels/aic."""

    orchestration: Path
    function_name: str
    signature: tuple[str, ...]
    kernels: tuple[Kernel, ...]


class _Directions(ast.NodeTransformer):
    """`D.IN` -> "IN"; any other name (the CANN include-dir lists of the externs) -> None."""

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == "D":
            return ast.copy_location(ast.Constant(node.attr), node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Constant(None), node)


def read_callable(test_file: Path, cls: str = CLASS) -> dict:
    """The `CALLABLE` literal of the example's test class `cls`, read from its syntax tree."""
    tree = ast.parse(test_file.read_text(encoding="utf-8"), str(test_file))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "CALLABLE"
                                                        for t in stmt.targets):
                    return ast.literal_eval(_Directions().visit(stmt.value))
    raise ValueError(f"{test_file}: no {cls}.CALLABLE")


def real_program(project_root: Path) -> RealProgram:
    """The example of simpler at `project_root`: its orchestration and its 34 generated kernels."""
    example = project_root / EXAMPLE
    spec = read_callable(example / TEST_FILE)
    kernels = []
    for incore in spec["incores"]:
        source = Path(incore["source"])
        if source.parent.name not in CORES or source.parent.parent.name != "kernels":
            continue                                    # the CANN externs under kernels/vendor/
        if source.parent.name != incore["core_type"]:
            raise ValueError(f"{incore['name']}: core_type {incore['core_type']} but its source is {source}")
        kernels.append(Kernel(incore["func_id"], incore["name"], incore["core_type"], tuple(incore["signature"]),
                              example / source))
    orch = spec["orchestration"]
    on_disk = sorted(p for core in CORES for p in (example / "kernels" / core).glob("*.cpp"))
    if sorted(k.source for k in kernels) != on_disk:
        raise ValueError(f"{example}: the CALLABLE's generated kernels differ from the .cpp files under "
                         f"kernels/aiv and kernels/aic")
    return RealProgram(example / orch["source"], orch["function_name"], tuple(orch["signature"]), tuple(kernels))


def kernel_config_text(program: RealProgram) -> str:
    """kernel_config.py in the format PyPTO's codegen writes (TAB indentation, `_D.` directions)."""
    def sig(directions: tuple[str, ...]) -> str:
        return "[" + ", ".join(f"_D.{d}" for d in directions) + "]"

    orch = program.orchestration.name
    lines = ["# Kernel and Orchestration Configuration\n", "from pathlib import Path\n",
             "from simpler.task_interface import ArgDirection as _D\n", "_ROOT_DIR = Path(__file__).parent\n",
             f"# Runtime configuration for {RUNTIME}.",
             "# AICPU thread count 0 selects the runtime's architecture default (a2a3: 4; a5: 5).",
             "RUNTIME_CONFIG = {", f'\t"runtime": "{RUNTIME}",', '\t"aicpu_thread_num": 0,', "}\n",
             "ORCHESTRATION = {", f'\t"source": str(_ROOT_DIR / "orchestration" / "{orch}"),',
             f'\t"function_name": "{program.function_name}",', f'\t"signature": {sig(program.signature)},', "}\n",
             "KERNELS = ["]
    for k in program.kernels:
        lines.append(f'\t{{"func_id": {k.func_id}, "name": "{k.name}", "source": str(_ROOT_DIR / "kernels" / '
                     f'"{k.core_type}" / "{k.source.name}"), "core_type": "{k.core_type}", '
                     f'"signature": {sig(k.signature)}}},')
    lines.append("]")
    return "\n".join(lines) + "\n"


def _compiled_meta(program: RealProgram) -> str:
    if len(PARAMS) != len(program.signature):
        raise ValueError(f"the orchestration takes {len(program.signature)} arguments, PARAMS lists {len(PARAMS)}")
    params = [{"name": name, "direction": _DIRECTIONS[d], "shape": shape, "dtype": dtype}
              for (name, dtype, shape), d in zip(PARAMS, program.signature)]
    return json.dumps({"schema": 1, "params": params, "num_return_types": 1, "platform": PLATFORM,
                       "backend_type": "Ascend910B"}, indent=2)


def write_real_dir(dest: Path, project_root: Path, names: tuple[str, ...] = ()) -> RealProgram:
    """Write the build directory at `dest` (which must not exist) from simpler at `project_root`; with `names`,
    only those kernels (a smaller directory for tests; the orchestration still names them all)."""
    program = real_program(project_root)
    if names:
        program = dataclasses.replace(program, kernels=tuple(k for k in program.kernels if k.source.stem in names))
    write_sources(dest, program)
    (dest / "compiled_meta.json").write_text(_compiled_meta(program), encoding="utf-8")
    return program


def write_sources(dest: Path, program: RealProgram) -> None:
    """`dest` (made; it must not exist) with the program's sources laid out as PyPTO's `ir.compile` writes them:
    orchestration/, kernels/<core>/ and kernel_config.py."""
    dest.mkdir(parents=True)
    (dest / "orchestration").mkdir()
    shutil.copyfile(program.orchestration, dest / "orchestration" / program.orchestration.name)
    for k in program.kernels:
        (dest / "kernels" / k.core_type).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(k.source, dest / "kernels" / k.core_type / k.source.name)
    (dest / "kernel_config.py").write_text(kernel_config_text(program), encoding="utf-8")


def simpler_root() -> Path:
    """simpler's project root as simpler resolves it (imports simpler_setup)."""
    from simpler_setup.environment import PROJECT_ROOT
    return Path(PROJECT_ROOT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="where to write the directory (must not exist)")
    parser.add_argument("--simpler", type=Path, help="simpler's project root (default: the importable simpler's)")
    args = parser.parse_args()
    if args.dest.exists():
        sys.exit(f"real_dir: {args.dest} exists; pass a new path")
    program = write_real_dir(args.dest, args.simpler or simpler_root())
    counts = {core: sum(k.core_type == core for k in program.kernels) for core in CORES}
    print(f"real_dir: wrote {args.dest}: {counts['aiv']} aiv + {counts['aic']} aic kernels and "
          f"orchestration/{program.orchestration.name}, platform {PLATFORM}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
