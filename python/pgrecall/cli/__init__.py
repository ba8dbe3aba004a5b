"""The ``pgrecall`` command: one module per command group (server, tenant, memory, reads, work, erase),
and here the parser that gathers them and ``main``, which turns every error into one line and its exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

import psycopg

from .. import errors, names
from . import erase, export, facts, memory, reads, server, sessions, tenant, work
from ._common import (
    EXIT_CONFLICT,
    EXIT_ERROR,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_NOT_PERMITTED,
    EXIT_NOT_TIDIED,
    EXIT_NOTHING_KEPT,
    EXIT_RESIDUAL,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    Subparsers,
    _fail,
    one_line,
)
from ._hints import for_cli

__all__ = ["EXIT_CONFLICT", "EXIT_ERROR", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_NOTHING_KEPT", "EXIT_NOT_FOUND",
           "EXIT_NOT_PERMITTED", "EXIT_NOT_TIDIED", "EXIT_RESIDUAL", "EXIT_UNREACHABLE", "EXIT_USAGE", "build_parser",
           "main", "one_line"]


# Every subcommand, in the order --help lists them.
COMMANDS: tuple[Callable[[Subparsers], None], ...] = (
    server.add_server, server.add_embedder, tenant.add_tenant, server.add_sql, tenant.add_peer, tenant.add_scope,
    memory.add_remember, memory.add_read, memory.add_correct, memory.add_forget,
    work.add_import, work.add_worker, work.add_deriver, work.add_embeddings, erase.add_erase, export.add_export,
    server.add_review, server.add_demo,
    reads.add_recall, reads.add_search, memory.add_supersede, memory.add_derive, reads.add_facts, reads.add_bundle,
    reads.add_mcp, sessions.add_session, sessions.add_document, facts.add_fact,
)


# The one line of `pgrecall --help` that points to the framework adapters (tests/test_cli_agent.py holds it to
# docs/agents.md's headings).
INTEGRATIONS = ("From LangGraph or the OpenAI Agents SDK: pgrecall.integrations (docs/agents.md, \"LangGraph: a "
                "store on pgrecall\" and \"OpenAI Agents: a session on pgrecall\").")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pgrecall",
        description="Agent memory inside PostgreSQL. Uses PGRECALL_DSN if set, else an embedded server "
        "under PGRECALL_HOME.",
        epilog=INTEGRATIONS,
    )
    parser.add_argument("--version", action="version", version=f"pgrecall {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    _add_examples(sub)
    return parser


def _version() -> str:
    from .. import __version__

    return __version__


# One example per subcommand, shown under its --help (a test holds every subcommand to it).
EXAMPLES = {
    "server": "pgrecall server uri --tenant acme --role worker",
    "embedder": "pgrecall embedder status --json",
    "tenant": "pgrecall tenant create acme\n  pgrecall tenant list --json\n"
              "  pgrecall tenant settings acme --set max_peers_in_session=20\n  pgrecall tenant drop acme --yes",
    "sql": "pgrecall sql --tenant acme > acme.sql && psql -v ON_ERROR_STOP=1 -f acme.sql \"$DATABASE_URL\"",
    "peer": "pgrecall peer add ana --kind human --tenant acme\n  pgrecall peer config ana --observed-globally no "
            "--tenant acme",
    "scope": "pgrecall scope add travel --tenant acme --description \"Ana's trips\"\n"
             "  pgrecall scope list --tenant acme\n  pgrecall scope passages travel --embed all --tenant acme",
    "session": "pgrecall session create trip --tenant acme --as ana --peer ana --peer sage\n"
               "  pgrecall session say 1 \"We fly to Oslo on Friday\" --tenant acme --as ana\n"
               "  pgrecall session peers 1 --tenant acme --as ana",
    "document": "pgrecall document add examples/sample_document.md --tenant acme --as ana",
    "fact": "pgrecall fact assert Ana lives_in Porto --evidence 3 --quote \"We moved to Porto\" --tenant acme "
            "--as ana\n  pgrecall fact traverse Ana --hops 2 --tenant acme --as ana\n"
            "  pgrecall fact predicates --tenant acme --as ana",
    "remember": "pgrecall remember --tenant acme --as ana --purpose converse --about Ana \"Ana is vegetarian\"",
    "read": "pgrecall read --tenant acme --as ana --purpose converse 1 --json",
    "correct": "pgrecall correct --tenant acme --as ana 1 \"Ana is vegan\" --revision 1 --evidence 2 "
               "--reason \"she said so\"",
    "forget": "pgrecall forget --tenant acme --as ana --reason \"she asked\" 1",
    "import": "pgrecall import examples/sample_chat.jsonl --tenant acme --scopes default",
    "worker": "pgrecall worker --tenant acme --once",
    "review": "pgrecall review --tenant demo --as Ana --scopes flat --port 8765   # then open http://127.0.0.1:8765/",
    "deriver": "pgrecall deriver --tenant acme --once",
    "embeddings": "pgrecall embeddings status --tenant acme\n  pgrecall embeddings rebuild --tenant acme --all",
    "erase": "pgrecall erase --tenant acme --subject u-42 --reason \"request #7\"",
    "export": "pgrecall export --tenant acme --subject u-42 --out u-42.jsonl\n"
              "  pgrecall import --export u-42.jsonl --tenant acme2   # into another tenant",
    "demo": "pgrecall demo\n  pgrecall demo --explain      # how each answer was ranked",
    "recall": "pgrecall recall --tenant demo --as Ana --scopes flat \"Where do Ana and Ben live?\"",
    "search": "pgrecall search --tenant demo --as Ana --scopes flat \"moved to Porto\" --json",
    "supersede": "pgrecall supersede --tenant acme --as ana 1 \"Ana lives in Porto\" --revision 1 --evidence 3",
    "derive": "pgrecall derive --tenant acme --as ana --from 1 --from 2 --kind decision "
              "\"Shared meals are vegetarian\"",
    "facts": "pgrecall facts --tenant acme --as ana Ana lives_in --valid-at 2025-06-01",
    "bundle": "pgrecall bundle --tenant demo --as Ana        # what a SessionStart hook prints",
    "mcp": "pgrecall mcp --tenant demo --as Ana               # stdio, for .mcp.json\n"
           "  pgrecall mcp --tenant demo --as Ana --http 127.0.0.1:8765",
}


def _add_examples(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Each subcommand's help says what it does (its one-line help) and shows an example."""
    helps = {action.dest: action.help for action in sub._choices_actions}
    for name, p in sub.choices.items():
        p.formatter_class = argparse.RawDescriptionHelpFormatter
        said = helps.get(name)
        if p.description is None and said:
            p.description = said[0].upper() + said[1:] + "."
        if name in EXAMPLES:
            p.epilog = "example:\n  " + EXAMPLES[name]


def importer_error() -> type[Exception]:
    from ..importer import ImportFileError

    return ImportFileError


def _exit_code(exc: BaseException) -> int:
    """The documented exit code for an error that ended a command."""
    if isinstance(exc, errors.ConcurrencyError):
        return EXIT_CONFLICT
    if isinstance(exc, LookupError):
        return EXIT_NOT_FOUND
    if isinstance(exc, PermissionError):
        return EXIT_NOT_PERMITTED
    if isinstance(exc, errors.EmbeddedServerError) or _unreachable(exc):
        return EXIT_UNREACHABLE
    return EXIT_ERROR


def _unreachable(exc: BaseException) -> bool:
    """A connection that failed or broke (class 08, the server shutting down), not a refused statement."""
    if isinstance(exc, errors.ConnectionLost):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate or ""
    return state == "" or state.startswith("08") or state.startswith("57P")


def main(argv: list[str] | None = None) -> int:
    said: dict[str, str | None] = {"tenant": None}  # the tenant named, for hints that say what to type

    def failed(message: str, hint: str | None = None, code: int = EXIT_ERROR) -> int:
        return _fail(for_cli(message, said["tenant"]) or message, for_cli(hint, said["tenant"]), code)

    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        said["tenant"] = getattr(args, "tenant", None) or getattr(args, "name", None)
        if args.command == "tenant" and args.action not in ("list", "rebalance") and args.name is None:
            parser.error(f"tenant {args.action} needs a NAME")
        # Every command that names a tenant, checked before anything connects or composes SQL.
        if getattr(args, "tenant", None) is not None:
            names.check_tenant_name(args.tenant)
        if args.command == "tenant" and args.action not in ("list", "rebalance", "restore"):
            names.check_tenant_name(args.name)  # (restore names its file there)
        if args.command == "tenant" and getattr(args, "as_name", None) is not None:
            names.check_tenant_name(args.as_name)
        result: int = args.func(args)
        return result
    except KeyboardInterrupt:
        print("pgrecall: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except errors.PgrecallError as exc:
        return failed(f"pgrecall: error: {exc.args[0] if exc.args else exc}", exc.hint, _exit_code(exc))
    except importer_error() as exc:
        return failed(f"pgrecall: error: {exc}")
    except psycopg.Error as exc:  # one line, not a traceback; ours by its class, others with their SQLSTATE
        if _unreachable(exc):
            return failed(f"pgrecall: cannot reach the database: {exc}", code=EXIT_UNREACHABLE)
        ours = errors.translate(exc)
        if isinstance(ours, errors.PgrecallError):
            return failed(f"pgrecall: error: {ours.args[0]}", ours.hint, _exit_code(ours))
        return failed(f"pgrecall: database error {exc.sqlstate or ''}: {exc.diag.message_primary or exc}",
                      exc.diag.message_hint)
    except BrokenPipeError:
        # `pgrecall ... | head`: the reader left; nothing more to say, and nowhere to say it.
        sys.stderr.close()
        return EXIT_ERROR
    except OSError as exc:  # a file to import or write that cannot be opened, a socket refused, ...
        return failed(f"pgrecall: error: {exc}", code=_exit_code(exc))
    except Exception as exc:  # a bug: still one line, with the exception's type to report
        if os.environ.get("PGRECALL_TRACEBACK"):
            raise
        return failed(f"pgrecall: internal error: {type(exc).__name__}: {exc}",
                      "Please report this line; PGRECALL_TRACEBACK=1 shows where it happened.", EXIT_INTERNAL)
