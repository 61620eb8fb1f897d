"""Target platforms: the seam in two small interfaces (base.py: `Platform` plans, `Runner` runs) and their
implementations (host; simpler's simulators and devices).

Door: `Platform`, `Runner`, `UnitSource` / `Command` / `PostStep` (what planning asks and gets back),
`implementation` / `Implementation` (the one door of the registry: `.locate()` for planning, `.runner()` for
running), `choose` / `Choice` (which platform a directory targets, and why), `choice_inputs` (what that
reads besides the markers), `cannot_serve`, `simpler_missing`, `key_module` / `toolchain_key` / `toolchain_key_now` (each
platform's no-op key part, light),
`DEFAULT_PLATFORM`, `PLATFORMS`, `HostPlatform`, `HostExecutor`, `HOST_OUTPUTS` (where host binaries go),
`kernel_payload`.
Modules: `base` (the interfaces), `records` (PyPTO's platform names, the default), `choice`, `installed`
(whether simpler is importable, and where), `noop_keys` (the light modules of the no-op key), `registry`
(implementations by name), `l3_driver` (the one L3 host driver, with its backend seam) and `l3_shims`
(the stand-ins for the modules a host driver imports: the only module that replaces `sys.modules`
entries); folders `host/` and `simpler/`.
"""
from __future__ import annotations

from ..core.doors import door

_EXPORTS = {
    "Platform": "base",
    "Runner": "base",
    "UnitSource": "base",
    "Command": "base",
    "PostStep": "base",
    "HostPlatform": "host.platform",
    "HostExecutor": "host.runtime.executor",
    "HOST_OUTPUTS": "host.places",
    "kernel_payload": "simpler.elf_payload",
    "PLATFORMS": "records",
    "DEFAULT_PLATFORM": "records",
    "implementation": "registry",
    "Implementation": "registry",
    "cannot_serve": "choice",
    "simpler_missing": "installed",
    "key_module": "noop_keys",
    "toolchain_key": "noop_keys",
    "toolchain_key_now": "noop_keys",
    "Choice": "choice",
    "choose": "choice",
    "choice_inputs": "choice",
}

__all__ = [*_EXPORTS]
__getattr__ = door(__name__, _EXPORTS)
