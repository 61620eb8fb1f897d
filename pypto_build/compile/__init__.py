"""The compile stage, shaped like `pto/`: its plan (plan: the units, what to compile, where, with which argv), the
one command it runs (command), its actions (actions: compile and stamp; steps: a device kernel's link
and extraction), its checks (checks: when a unit is up to date, with reasons), the depfile reader and the
states of headers outside the directory (header_sets). A plain folder."""
