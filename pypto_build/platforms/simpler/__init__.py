"""simpler."""
