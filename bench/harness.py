"""What every bench does around its measurements: a throwaway embedded server, the header of its report,
and the files the report goes to (bench/README.md: results/latest-*.md, every run in results/archive/)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql


@contextmanager
def embedded_server(prefix: str, settings: Mapping[str, str] | None = None) -> Iterator[Any]:
    """A new embedded PostgreSQL in a temporary PGRECALL_HOME (a PGRECALL_DSN of the caller's is set aside),
    with ``settings`` applied (ALTER SYSTEM and a restart); stopped and removed afterwards. Yields its
    ServerInfo (``info.uri()`` is the superuser's URI)."""
    home = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["PGRECALL_HOME"] = str(home)
    os.environ.pop("PGRECALL_DSN", None)
    from pgrecall import server

    try:
        info = server.start()
        if settings:
            with psycopg.connect(info.uri(), autocommit=True) as conn:
                for name, value in settings.items():
                    conn.execute(sql.SQL("alter system set {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            server.stop()
            info = server.start()
        yield info
    finally:
        server.stop()
        shutil.rmtree(home, ignore_errors=True)


def new_report(command: str, argv: Sequence[str] | None, **fields: Any) -> dict[str, Any]:
    """A report's header: when, on what machine, and the command (``{args}`` in it: the arguments given)."""
    given = " ".join(argv if argv is not None else sys.argv[1:])
    return {"started": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, PostgreSQL 18 (embedded)",
            "command": command.format(args=given), **fields}


def stamp(report: Mapping[str, Any]) -> str:
    """The run's time stamp in file names: 20261201T064500."""
    return str(report["started"]).replace(":", "").replace("-", "")[:15]


def write_report(out: Path, name: str, report: Mapping[str, Any], md: str, *, latest: str | None = None,
                 default: Callable[[Any], Any] | None = None) -> None:
    """The run as out/archive/<name>-<stamp>.json and .md, and its Markdown as out/<latest> (by default
    latest-<name>.md)."""
    archive = out / "archive"
    archive.mkdir(parents=True, exist_ok=True)
    (archive / f"{name}-{stamp(report)}.json").write_text(json.dumps(report, indent=2, default=default))
    (archive / f"{name}-{stamp(report)}.md").write_text(md)
    (out / (latest or f"latest-{name}.md")).write_text(md)
