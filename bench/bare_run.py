"""A bare run of a built a2a3sim directory through simpler's API: the floor of any tool's run step.

    <simpler venv>/bin/python bench/bare_run.py DIR BINARIES_JSON       # prints {"seconds": ...}
    <simpler venv>/bin/python bench/bare_run.py DIR --sizes             # prints {"inputs": bytes, "outputs": bytes}

BINARIES_JSON maps "orchestration" and each kernel's func_id to the binary the build wrote (the bench reads them
from the graph). The inputs come from DIR's golden.py `generate_inputs`, in compiled_meta.json's parameter order
(tensors, then scalars), as pypto_build's simpler runner passes them; only Worker(level=2) init -> register ->
run -> close is timed (pypto_build/platforms/simpler/run.py `_run`), not the imports nor making the inputs.
Nothing is compared and nothing is written into DIR.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True          # no __pycache__ beside DIR's golden.py or kernel_config.py


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(root: Path) -> tuple[list, list[dict]]:
    """golden.py's (name, value) pairs in the orchestration's order, and compiled_meta.json's params."""
    params = json.loads((root / "compiled_meta.json").read_text())["params"]
    pairs = dict(_module("_bench_golden", root / "golden.py").generate_inputs({"name": "Default"}))
    return [pairs[p["name"]] for p in params], params


def sizes(root: Path) -> dict:
    """Bytes of the tensors the program reads (In, InOut) and writes (Out, InOut)."""
    import torch

    args, params = inputs(root)
    read = sum(a.nbytes for a, p in zip(args, params) if isinstance(a, torch.Tensor) and p["direction"] != "Out")
    wrote = sum(a.nbytes for a, p in zip(args, params) if isinstance(a, torch.Tensor) and p["direction"] != "In")
    return {"inputs": read, "outputs": wrote}


def run(root: Path, binaries: dict) -> float:
    import torch
    from simpler.task_interface import ArgDirection, CallConfig, ChipCallable, CoreCallable, TaskArgs, scalar_to_uint64
    from simpler.worker import Worker
    from simpler_setup.torch_interop import make_tensor_arg

    config = _module("_bench_kernel_config", root / "kernel_config.py")
    runtime = config.RUNTIME_CONFIG.get("runtime", "tensormap_and_ringbuffer")
    meta = json.loads((root / "compiled_meta.json").read_text())
    args, _ = inputs(root)

    def directions(signature) -> list:      # kernel_config.py names simpler's own ArgDirection members
        return [d if isinstance(d, ArgDirection) else ArgDirection.__members__[str(d)] for d in signature]

    children = [(k["func_id"], CoreCallable.build(signature=directions(k["signature"]),
                                                  binary=Path(binaries[str(k["func_id"])]).read_bytes()))
                for k in config.KERNELS]
    orch = config.ORCHESTRATION
    chip = ChipCallable.build(signature=directions(orch["signature"]), func_name=orch["function_name"],
                              binary=Path(binaries["orchestration"]).read_bytes(), children=children)
    cfg = CallConfig()
    if config.RUNTIME_CONFIG.get("aicpu_thread_num") is not None:
        cfg.aicpu_thread_num = config.RUNTIME_CONFIG["aicpu_thread_num"]
    cfg.validate()
    start = time.perf_counter()
    worker = Worker(level=2, device_id=0, platform=meta["platform"], runtime=runtime, enable_sdma=False)
    try:
        worker.init(prewarm_config=cfg)
        task_args = TaskArgs()
        for arg in args:
            if isinstance(arg, torch.Tensor):
                task_args.add_tensor(make_tensor_arg(worker, arg))
        for arg in args:
            if not isinstance(arg, torch.Tensor):
                task_args.add_scalar(scalar_to_uint64(arg))
        worker.run(worker.register(chip), task_args, cfg)
    finally:
        worker.close()
    return time.perf_counter() - start


def main() -> int:
    root = Path(sys.argv[1]).resolve()
    if sys.argv[2] == "--sizes":
        result = sizes(root)
    else:
        result = {"seconds": run(root, json.loads(sys.argv[2]))}
    print("BARE_RUN " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
