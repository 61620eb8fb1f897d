"""toolchain."""
