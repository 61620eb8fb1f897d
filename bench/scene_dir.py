"""A PyPTO-style a2a3sim build directory made from one of simpler's scene-test examples, with a real golden.

    <simpler venv>/bin/python bench/scene_dir.py DEST [--example benchmark_bgemm] [--case Case0]

simpler's examples (`examples/a2a3/tensormap_and_ringbuffer/<name>/`) are PyPTO-shaped programs with
a scene test: its `CALLABLE` names the orchestration and the kernels, its `CASES` the parameters, and
its `generate_args` / `compute_golden` make the inputs and the expected outputs. `write_scene_dir`
lays the program out the way PyPTO's `ir.compile` does (`kernel_config.py`, `compiled_meta.json`
naming a2a3sim, `orchestration/`, `kernels/<core>/`) and writes a `golden.py` in PyPTO's contract
whose `generate_inputs` seeds torch and calls the example's own `generate_args`, and whose
`compute_golden` calls its `compute_golden`: the program, the numbers and the check are simpler's.

`EXAMPLES` holds the two the loop benchmark uses: `benchmark_bgemm` (its "Sim default" case, 500
GEMM + ADD task pairs on fp32 128x128 tiles, about 330 MB of inputs) and `vector_example` (three
aiv kernels, a small run). (`paged_attention`'s a2a3sim case fails simpler's own scene test at
93adc38: its numbers are not the golden's.) Needs torch (the parameters are read from one
call of `generate_args`) and simpler importable (the example's test module imports it).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from real_dir import PLATFORM, Kernel, RealProgram, read_callable, simpler_root, write_sources

SCENES = Path("examples") / "a2a3" / "tensormap_and_ringbuffer"
_DIRECTIONS = {"IN": "In", "OUT": "Out", "INOUT": "InOut"}
_DTYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bfloat16", "int32": "int32", "int64": "int64",
           "int8": "int8", "uint8": "uint8", "c_float": "fp32", "c_int32": "int32", "c_int64": "int64"}


@dataclass(frozen=True)
class SceneExample:
    """One example: its folder under examples/a2a3/tensormap_and_ringbuffer, test file, class and case."""

    name: str
    test_file: str
    cls: str
    case: str


EXAMPLES = {
    "benchmark_bgemm": SceneExample("benchmark_bgemm", "test_benchmark_bgemm.py", "TestBenchmarkBgemm", "Case0"),
    "vector_example": SceneExample("vector_example", "test_vector_example.py", "TestVectorExample", "default"),
}

# vector_example's kernels edited as a user might: `kernel_add_scalar` adds one more (its numbers break), `kernel_add`
# gets a new exported variable (its binary changes, its numbers do not). File, text, replacement; bench_bisect.py
# and tests/test_bisect_simpler.py make the failing directory with them.
VECTOR_EDITS = (("kernels/aiv/kernel_add_scalar.cpp", "TADDS(dstTile, srcTile, scalar);",
                 "TADDS(dstTile, srcTile, scalar + 1.0f);"),
                ("kernels/aiv/kernel_add.cpp", "using namespace pto;",
                 'using namespace pto;\nextern "C" volatile int bisect_harmless = 7;'))

_GOLDEN = '''"""golden.py for simpler's {name} example, case {case}: the example's own generate_args and compute_golden.

Written by pypto_build's bench/scene_dir.py. generate_inputs seeds torch, so it makes the same inputs each time.
"""
import importlib.util
import sys
from pathlib import Path

import torch

_TEST = Path({test!r})
PARAMS = {params!r}
SEED = {seed}
__outputs__ = {outputs!r}
RTOL = {rtol!r}
ATOL = {atol!r}


def _scene():
    spec = importlib.util.spec_from_file_location("_scene_{name}", _TEST)
    module = sys.modules.get(spec.name)
    if module is None:      # the scene decorator finds the class's file through sys.modules
        module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return getattr(module, {cls!r})()


def generate_inputs(params):
    torch.manual_seed(SEED)
    args = _scene().generate_args(PARAMS)
    return [(spec.name, spec.value) for spec in args.specs]


def compute_golden(tensors, params):
    _scene().compute_golden(_Args(tensors), PARAMS)


class _Args:
    """The attribute and `specs` view of the tensors that the example's compute_golden reads (TaskArgsBuilder's)."""

    def __init__(self, tensors):
        from simpler_setup import TensorArg
        self.__dict__.update(tensors)
        self.specs = [TensorArg(n, v) for n, v in tensors.items() if isinstance(v, torch.Tensor)]
'''


def _load_scene(test: Path, cls: str):
    spec = importlib.util.spec_from_file_location(f"_scene_{test.stem}", test)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, cls)


def scene_program(project_root: Path, example: SceneExample) -> tuple[RealProgram, Path]:
    """The example's program (orchestration and kernels, from its CALLABLE) and its test file."""
    folder = project_root / SCENES / example.name
    spec = read_callable(folder / example.test_file, example.cls)
    kernels = tuple(Kernel(k["func_id"], k.get("name") or Path(k["source"]).stem, k["core_type"],
                           tuple(k["signature"]), folder / k["source"]) for k in spec["incores"])
    orch = spec["orchestration"]
    return (RealProgram(folder / orch["source"], orch["function_name"], tuple(orch["signature"]), kernels),
            folder / example.test_file)


def _params_meta(program: RealProgram, pairs: list) -> list[dict]:
    """compiled_meta.json's params: tensors in the orchestration's signature order, then scalars (In)."""
    import torch

    tensors = [(n, v) for n, v in pairs if isinstance(v, torch.Tensor)]
    if len(tensors) != len(program.signature):
        raise ValueError(f"generate_args makes {len(tensors)} tensors, the orchestration takes "
                         f"{len(program.signature)}")
    params = [{"name": n, "direction": _DIRECTIONS[d], "shape": list(v.shape),
               "dtype": _DTYPES[str(v.dtype).removeprefix("torch.")]} for (n, v), d in zip(tensors, program.signature)]
    params += [{"name": n, "direction": "In", "shape": None, "dtype": _DTYPES[type(v).__name__]}
               for n, v in pairs if not isinstance(v, torch.Tensor)]
    return params


def write_scene_dir(dest: Path, project_root: Path, example: SceneExample, seed: int = 0) -> RealProgram:
    """Write the build directory at `dest` (which must not exist) for `example` of simpler at `project_root`."""
    import torch

    program, test = scene_program(project_root, example)
    scene = _load_scene(test, example.cls)
    case = next(c for c in scene.CASES if c["name"] == example.case)
    torch.manual_seed(seed)
    pairs = [(s.name, s.value) for s in scene().generate_args(case["params"]).specs]
    params = _params_meta(program, pairs)
    outputs = [p["name"] for p in params if p["direction"] in ("Out", "InOut")]
    write_sources(dest, program)
    (dest / "compiled_meta.json").write_text(json.dumps(
        {"schema": 1, "params": params, "num_return_types": 0, "platform": PLATFORM,
         "backend_type": "Ascend910B"}, indent=2), encoding="utf-8")
    (dest / "golden.py").write_text(_GOLDEN.format(
        name=example.name, case=example.case, test=str(test), params=case["params"], seed=seed, outputs=outputs,
        rtol=float(getattr(scene, "RTOL", 1e-5)), atol=float(getattr(scene, "ATOL", 1e-5)), cls=example.cls),
        encoding="utf-8")
    return program


def edit_kernels(root: Path, edits: tuple[tuple[str, str, str], ...]) -> None:
    """Apply `edits` (file, text, replacement; each text found once) to the directory at `root`."""
    for rel, old, new in edits:
        path = root / rel
        text = path.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise ValueError(f"{path}: {old!r} found {text.count(old)} times, not once")
        path.write_text(text.replace(old, new), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path, help="where to write the directory (must not exist)")
    parser.add_argument("--example", choices=sorted(EXAMPLES), default="benchmark_bgemm")
    parser.add_argument("--simpler", type=Path, help="simpler's project root (default: the importable simpler's)")
    args = parser.parse_args()
    if args.dest.exists():
        sys.exit(f"scene_dir: {args.dest} exists; pass a new path")
    example = EXAMPLES[args.example]
    program = write_scene_dir(args.dest, args.simpler or simpler_root(), example)
    print(f"scene_dir: wrote {args.dest}: {example.name} {example.case}, {len(program.kernels)} kernels and "
          f"orchestration/{program.orchestration.name}, platform {PLATFORM}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
