"""Synthetic PyPTO build directories for tests and benchmarks (not product code).

Door: `synth` (write_l2, write_l3, write_multi, ...), offered whole.
"""
from __future__ import annotations

from ..doors import door

_EXPORTS = {
}
_MODULES = ('synth',)

__all__ = [*_EXPORTS, *_MODULES]
__getattr__ = door(__name__, _EXPORTS, _MODULES)
