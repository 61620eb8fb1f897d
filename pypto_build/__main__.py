"""`python -m pypto_build ...` is `pypto-build ...`."""
import os
import sys

# `python -m` puts the working directory first on sys.path. Run inside a build directory (untrusted
# data), a doit.py or json.py there would shadow the real module: drop it before importing anything.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from .cli.quick import start  # noqa: E402

start()
