"""Target platforms: each declared once (records.py: `Record`), the seam in two small interfaces (base.py:
`Platform` plans, reading its `Facts`; `Runner` runs) and their implementations (host; simpler's simulators
and devices).

Door: `Record`, `RECORDS` (every platform's record), `platform_names`, `DEFAULT_PLATFORM`, `cannot_serve`
(light: the records say); `Platform`, `Facts`, `NoopKey`, `Runner`, `UnitSource` / `Command` / `PostStep`
(what planning asks and gets back), `implementation` / `Implementation` (the one door of the registry:
`.locate()` for planning, `.runner()` for running), `choose` / `Choice` (which platform a directory targets,
and why), `choice_inputs` (what that reads besides the markers), `simpler_missing`, `key_module` /
`toolchain_key` / `toolchain_key_now` (each platform's no-op key part, light), `HostPlatform`,
`HostExecutor`, `HOST_OUTPUTS` (where host binaries go), `kernel_payload`, `clear_dfx` (what goes from
dfx_outputs/ before an L2 run: `dfx_outputs`, the one home of that folder's handling).
Modules: `records` (every platform's record: the one table), `base` (the interfaces and their data),
`choice`, `installed` (whether simpler is importable, and where), `noop_keys` (the light modules of the
no-op key), `registry` (implementations by name), `l3_driver` (the one L3 host driver, with its backend
seam), `dfx_outputs` (a run's dfx_outputs folder: cleared before, listed after) and `l3_shims` (the stand-ins for the modules a host driver imports: the only module that replaces
`sys.modules` entries); folders `host/` and `simpler/`.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "Record": "records",
    "RECORDS": "records",
    "platform_names": "records",
    "DEFAULT_PLATFORM": "records",
    "cannot_serve": "records",
    "Platform": "base",
    "Facts": "base",
    "NoopKey": "base",
    "Runner": "base",
    "UnitSource": "base",
    "Command": "base",
    "PostStep": "base",
    "HostPlatform": "host.platform",
    "HostExecutor": "host.runtime.executor",
    "HOST_OUTPUTS": "host.places",
    "kernel_payload": "simpler.elf_payload",
    "implementation": "registry",
    "Implementation": "registry",
    "simpler_missing": "installed",
    "key_module": "noop_keys",
    "toolchain_key": "noop_keys",
    "toolchain_key_now": "noop_keys",
    "Choice": "choice",
    "choose": "choice",
    "choice_inputs": "choice",
    "clear_dfx": "dfx_outputs",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
