"""PyPTO's own platforms through simpler: the simulators (sim) and the NPUs (device, with CANN: cann,
elf_payload); simpler's exact argv (argv), where it lives and its identities (env), where PyPTO reads a
sub-build's binaries (places); running on simpler's Worker (runner, run, l3)."""
