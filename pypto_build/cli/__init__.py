"""The front ends on the command line: `pypto-build` (main: the table of verbs), the verbs (verbs, watch),
the doit commands (doit_plugins), `pypto-build example` and `compdb`. A plain folder."""
