"""pgrecall: agent memory that lives inside PostgreSQL.

Nothing here connects at import time. ``pgrecall.connect(tenant=...)`` returns a
handle whose methods each call one stored function; ``pgrecall.install`` installs
tenants; the ``pgrecall`` command does both from a shell.
"""

__version__ = "0.1.0"

from .driver import Memory, MemoryRecord, RecallItem, Recalled, Remembered, connect  # noqa: E402
from .errors import PgrecallError  # noqa: E402

__all__ = ["Memory", "MemoryRecord", "PgrecallError", "RecallItem", "Recalled", "Remembered", "__version__", "connect"]
