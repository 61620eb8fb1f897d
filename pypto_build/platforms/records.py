"""The platform names PyPTO records, and the one a run targets when nothing chooses another (`choice.choose`
decides; light: the no-op path asks)."""
from __future__ import annotations

PLATFORMS = ("host", "a2a3sim", "a5sim", "a2a3", "a5")      # every name PyPTO records
DEFAULT_PLATFORM = "host"
