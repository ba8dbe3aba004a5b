"""pgrecall: agent memory that lives inside PostgreSQL.

Nothing here connects at import time. ``pgrecall.connect(tenant=...)`` returns a
handle whose methods each call one stored function (``await
pgrecall.connect_async(...)`` the same over asyncio); ``pgrecall.install``
installs tenants; the ``pgrecall`` command does both from a shell.
"""

__version__ = "0.1.0"

from .driver import (
    AsyncMemory,
    Memory,
    MemoryItem,
    MemoryRecord,
    ObservationRow,
    Recalled,
    RecallItem,
    Remembered,
    configure,
    configure_async,
    connect,
    connect_async,
)
from .errors import PgrecallError

__all__ = [
    "AsyncMemory", "Memory", "MemoryItem", "MemoryRecord", "ObservationRow",
    "PgrecallError", "RecallItem", "Recalled", "Remembered", "__version__",
    "configure", "configure_async", "connect", "connect_async",
]
