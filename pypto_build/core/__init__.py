"""Core: files, clocks, hashing, processes, environment variables, confinement, the error lines and exit
status, the stage names. Nothing PyPTO-specific; every other folder builds on it. A plain folder: its
modules are imported by name (atomic, safeio, hashing, racy, filestate, settings, limits, confine, procs,
oserrors, shared_flag, doors, pyexec, exits, pipes, stages)."""
