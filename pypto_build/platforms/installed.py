"""Whether simpler (PyPTO's runtime) is importable by this Python. Light (importlib.util, sys): the
platform choice asks it, and so does the console script's no-op answer when the choice depended on it."""
from __future__ import annotations

import importlib.util
import sys

SIMPLER_MODULES = ("simpler", "simpler_setup", "_task_interface")   # what a simpler install provides


def simpler_missing() -> str | None:
    """Why simpler cannot serve here (a module it provides is not importable), or None. Imports nothing."""
    for name in SIMPLER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (f"PyPTO's runtime simpler is not installed for {sys.executable} (module {name} not "
                    "importable): install simpler into this Python (pip install --no-build-isolation "
                    "<simpler checkout>) or run pypto_build with the Python that has it")
    return None
