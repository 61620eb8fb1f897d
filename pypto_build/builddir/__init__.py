"""Reading a PyPTO build directory: its markers, `kernel_config.py` (manifest, by AST), the layout it has,
the sidecars, the stamp, PyPTO's run configuration. Reads only; a plain folder (markers, manifest_ast,
manifest, layout, sidecars, stamp, runconfig)."""

STATE_DIR = ".pypto_build"     # our state in a build directory (here: the no-op answer reads it first)
