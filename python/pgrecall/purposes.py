"""The four purposes a memory may be used for, as Python reads them.

The catalog defines them once (the tenant's ``_purposes()``, plpgsql/validation.sql); this constant is
Python's copy, for argparse choices and MCP schemas that must exist before any connection, and
tests/test_purposes.py fails when the two disagree.
"""

from __future__ import annotations

PURPOSES: tuple[str, ...] = ("converse", "act", "personalize", "review")
