"""What a func_id is in a sub-build: its kernel's name, source file and signature (from `kernel_config.py`, read
by `builddir.manifest` without executing it), for naming the task a comparison blames."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..builddir.layout import SubBuild, resolve_in
from ..builddir.manifest import read_kernel_config
from ..builddir.markers import KERNEL_CONFIG
from ..core.limits import read_capped
from ..errors import TooLarge

__all__ = ["KernelInfo", "kernel_map", "kernels_of", "tensor_params"]

# PyPTO's kernel wrapper unpacks its tensors in signature order, each under `// Unpack tensor: <name>`.
_UNPACK = re.compile(r"^\s*//\s*Unpack tensor:\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class KernelInfo:
    """One kernel of a sub-build: `name` (KERNELS' name, else its source's stem), `source` (absolute),
    `signature` (its tensors' directions: IN / OUT / INOUT, positional), `core_type` (aic / aiv), `params`: its
    tensor parameters' names in signature order (`tensor_params`; empty when the source does not say)."""

    func_id: int
    name: str
    source: Path
    signature: tuple[str, ...]
    core_type: str
    params: tuple[str, ...] = ()


def kernel_map(sub_build: Path) -> dict[int, KernelInfo]:
    """func_id -> KernelInfo of the sub-build at `sub_build` (a folder with kernel_config.py: an L2 build's root
    or `next_levels/<name>/`); raises ManifestError (one line) for an unreadable kernel_config.py."""
    root = Path(sub_build).resolve()
    return kernels_of(SubBuild(".", ".", root, read_kernel_config(root / KERNEL_CONFIG)))


def kernels_of(sub: SubBuild) -> dict[int, KernelInfo]:
    """func_id -> KernelInfo of a sub-build already read (a planned one: its kernel_config.py is not read again)."""
    found = {}
    for spec in sub.config.kernels:
        source = resolve_in(sub, spec.source, spec.rooted)
        found[spec.func_id] = KernelInfo(spec.func_id, spec.name or source.stem, source, spec.signature,
                                         spec.core_type, tensor_params(source))
    return found


def tensor_params(source: Path) -> tuple[str, ...]:
    """The tensor parameter names of the kernel wrapper at `source`, in order (its `// Unpack tensor: <name>`
    lines, as PyPTO generates them); () when it has none or cannot be read (a name is a courtesy, not a need)."""
    try:
        text = read_capped(source).decode("utf-8", "replace")
    except (OSError, TooLarge):
        return ()
    return tuple(_UNPACK.findall(text))
