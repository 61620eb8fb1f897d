"""The front ends on the command line: `pypto-build` (main: the table of verbs), the verbs (watch; build, replay,
validate and explain are `pypto_build.verbs`, a layer below), the doit commands (doit_plugins), `pypto-build
example` and `compdb`. A plain folder."""
