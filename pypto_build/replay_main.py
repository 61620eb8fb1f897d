"""Where `debug/run.py` files written before the package was split into folders import `main` from.

Those scripts live in users' build directories; they keep working. New ones
import `pypto_build.compat.runner_main` (compat/runner.py writes them).
"""
from __future__ import annotations

from .compat import runner_main

main = runner_main.main

__all__ = ["main"]
