"""`host`: our own CPU runtime. platform (planning: HostPlatform), places (where its binaries and stamp go),
run (running: HostRunner), runtime/ (the executor, the ABI, DFX, the L3 backend and its rank workers),
headers/ (the C++ headers kernels compile against; their digest is the host runtime's revision)."""
