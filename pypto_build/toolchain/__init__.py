"""The tools a build runs and their identities: the compiler (resolved, digested, its search
directories), identities of runtimes and PTO-ISA, compile launchers (distcc, icecream) and the local
slots that bound local work. A plain folder (compiler, search_dirs, identity, launcher, local_slots)."""
