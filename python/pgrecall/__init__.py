"""pgrecall: agent memory that lives inside PostgreSQL.

Nothing here connects at import time; see :func:`pgrecall.install.install`
and the ``pgrecall`` command.
"""

__version__ = "0.1.0"

from .errors import PgrecallError  # noqa: E402

__all__ = ["PgrecallError", "__version__"]
