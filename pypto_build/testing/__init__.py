"""Test support (not product code): synthetic PyPTO build directories, a stand-in compiler and platform.

Door: `FakePlatform` (plan and build with the stand-in compiler: staleness tests without g++);
`synth` (write_l2, write_l3, write_multi, ...) and `fake_compiler` (the stand-in itself, a script),
offered whole.
"""
from __future__ import annotations

from ..doors import door

_EXPORTS = {
    "FakePlatform": "fake_platform",
}
_MODULES = ('synth', 'fake_compiler')

__all__ = [*_EXPORTS, *_MODULES]
__getattr__ = door(__name__, _EXPORTS, _MODULES)
