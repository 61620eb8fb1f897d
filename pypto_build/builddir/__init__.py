"""Reading a PyPTO build directory: its markers, `kernel_config.py` (manifest, by AST), the layout it has,
the sidecars, the stamp, PyPTO's run configuration. Reads only; a plain folder (markers, manifest_ast,
manifest, layout, sidecars, stamp, runconfig)."""
