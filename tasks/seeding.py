"""Seeds every family derives its streams from (docs/architecture.md, "Seeding")."""

from __future__ import annotations

import hashlib


def stable_hash(text: str) -> int:
    """A 32-bit integer from ``text`` that is the same on every machine and run (Python's
    own ``hash`` of a string changes from one process to the next)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
