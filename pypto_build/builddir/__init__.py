"""Reading a PyPTO build directory: its markers, `kernel_config.py` (manifest, by AST), the layout it has,
the sidecars, the stamp, PyPTO's run configuration, and where we keep our own state in it. Reads only; a
plain folder (markers, state_dir, manifest_ast, manifest, layout, sidecars, stamp, runconfig)."""
