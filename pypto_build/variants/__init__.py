"""The variants of a program a build directory ran: their history, their units, the store that keeps their binaries.

Modules: `units` (a program's units and the variant's id), `history` (`.pypto_build/history.json`), `store` (the
per-user store of the kept binaries and sources), `record` (what a verdict run records).
"""
