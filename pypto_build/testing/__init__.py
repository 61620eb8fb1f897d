"""Test support (not product code): synthetic PyPTO build directories, a stand-in compiler and platform.

Door: `FakePlatform` (plan and build with the stand-in compiler: staleness tests without g++) and its record
`FAKE_RECORD` (a test adds it to `platforms.RECORDS` to declare the fake as a platform);
`synth` (write_l2, write_l3, write_multi_orch, ...), `fake_compiler` (the stand-in itself, a script),
`fake_cann` (make_fake_cann: a labelled stand-in CANN tree for a2a3/a5 device builds), `fake_ptoas` (a
labelled stand-in ptoas: the tests' and `pypto-build example --pto`'s; make_fake_ptoas) and `loopback`
(real servers on 127.0.0.1: distccd), offered whole.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "FakePlatform": "fake_platform",
    "FAKE_RECORD": "fake_platform",
}
_MODULES = ('synth', 'fake_compiler', 'fake_cann', 'fake_ptoas', 'loopback')

__all__ = [*_EXPORTS, *_MODULES]
__getattr__ = door(__name__, _EXPORTS, _MODULES)
