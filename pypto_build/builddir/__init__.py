"""builddir."""
