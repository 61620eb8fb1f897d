"""The tools a build runs and their identities: the compiler (resolved, digested, its search
directories), identities of runtimes and PTO-ISA, compile launchers (distcc, icecream) and the local
slots that bound local work. A plain folder (compiler, compile_env, driver, search_dirs, identity, launcher,
local_slots, git_watch, watch_stats)."""
