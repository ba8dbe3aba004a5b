"""Exceptions raised by pgrecall, one class per SQLSTATE of the PR class.

The SQL functions raise errors with SQLSTATE class ``PR``; the driver turns
each into the class below and chains the original psycopg error, so callers
can catch on meaning and still read the server's message and hint.

The codes are listed once, in sql/errors.sql (loaded into pgrecall.error_code);
tests/test_error_codes.py holds these classes to that list. Each class also
derives from the Python built-in that fits it (ValueError for bad input,
LookupError for not found, PermissionError for not allowed, RuntimeError for a
lost race, through ConcurrencyError), so a caller may catch either.
"""

from __future__ import annotations

from typing import Any

import psycopg


class PgrecallError(Exception):
    """Base class of every error pgrecall raises on purpose."""

    sqlstate: str | None = None

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\nHINT: {self.hint}" if self.hint else text


class ConcurrencyError(PgrecallError, RuntimeError):
    """Another writer got there first (a revision, a lease, a decision): re-read and decide again."""


class InvalidTenantName(PgrecallError, ValueError):
    sqlstate = "PR001"


class TenantExists(PgrecallError, ValueError):
    sqlstate = "PR002"


class TenantNotFound(PgrecallError, LookupError):
    sqlstate = "PR003"


class MigrationChanged(PgrecallError):
    sqlstate = "PR004"


class MissingPrerequisite(PgrecallError):
    sqlstate = "PR005"


class InvalidSetting(PgrecallError, ValueError):
    sqlstate = "PR006"


class SchemaTooNew(PgrecallError):
    sqlstate = "PR007"


class UndeclaredDuty(PgrecallError):
    """A tenant function has no row in the duty matrix (sql/duties.sql): the install stops."""

    sqlstate = "PR008"


class NotPermitted(PgrecallError, PermissionError):
    """The login role lacks the duty this call needs (e.g. erase is the admin's, claiming work the worker's)."""

    sqlstate = "42501"


class UnknownPeer(PgrecallError, LookupError):
    sqlstate = "PR101"


class InvalidPurpose(PgrecallError, ValueError):
    sqlstate = "PR102"


class ScopeNotAuthorised(PgrecallError, PermissionError):
    """The scope is unknown, or not in the caller's authorised set."""

    sqlstate = "PR103"


class MemoryNotFound(PgrecallError, LookupError):
    """The memory does not exist, or the principal may not see it: the two are not told apart."""

    sqlstate = "PR104"


class RevisionConflict(ConcurrencyError):
    """Someone changed the memory after the caller read it."""

    sqlstate = "PR105"


class EmptyIntersection(PgrecallError, ValueError):
    """derive: the sources share no scope, audience or purpose."""

    sqlstate = "PR106"


class InvalidArgument(PgrecallError, ValueError):
    sqlstate = "PR107"


class MemoryNotLive(ConcurrencyError):
    """The memory was superseded or forgotten."""

    sqlstate = "PR108"


class ObservationNotFound(PgrecallError, LookupError):
    sqlstate = "PR109"


class AppendOnly(PgrecallError):
    sqlstate = "PR110"


class UnknownPredicate(PgrecallError, ValueError):
    sqlstate = "PR111"


class EvidenceMismatch(PgrecallError, ValueError):
    """The quote is not exactly the bytes of its span, or the span is not in the observation."""

    sqlstate = "PR112"


class RolePolicyViolation(PgrecallError, ValueError):
    """A fact about a human peer whose only evidence is what an assistant said."""

    sqlstate = "PR113"


class UnknownEntity(PgrecallError, LookupError):
    sqlstate = "PR114"


class FactNotFound(PgrecallError, LookupError):
    sqlstate = "PR115"


class UnknownSession(PgrecallError, LookupError):
    """No such session, or an observation names a session of another scope."""

    sqlstate = "PR120"


class SessionFull(PgrecallError):
    """The session already holds max_peers_in_session peers."""

    sqlstate = "PR121"


class NotInSession(PgrecallError, LookupError):
    """The peer is not (or no longer) in the session."""

    sqlstate = "PR122"


class LeaseLost(ConcurrencyError):
    """The task is not leased with this token (the lease expired and it was claimed again, or it is finished)."""

    sqlstate = "PR123"


class UnknownTask(PgrecallError, LookupError):
    sqlstate = "PR124"


class MessageSearchOff(PgrecallError):
    """search_messages: the tenant switched off every arm the call asked for."""

    sqlstate = "PR130"


class InvalidName(InvalidArgument):
    """A peer or scope name breaks the name rules (control, format or invisible characters, odd spacing,
    mixed Latin/Cyrillic/Greek letters in a word, length). An InvalidArgument, as it was before it had a code."""

    sqlstate = "PR140"


class OutOfRange(InvalidArgument):
    """A number outside its range: a limit, hops, a confidence, an id or an offset (bigger than a bigint too)."""

    sqlstate = "PR150"


class TextTooLong(InvalidArgument):
    """A text longer than its limit (some limits are tenant settings, named in the hint)."""

    sqlstate = "PR151"


class InvalidTime(InvalidArgument):
    """A time that is infinite or outside years 1 to 9999 (what ISO 8601 and Python's datetime hold),
    or an empty time range."""

    sqlstate = "PR152"


class InvalidSelector(InvalidArgument):
    """erase: the selector is not one of the four shapes (observation, data_subject, peer, scope)."""

    sqlstate = "PR153"


class WrongDimensions(InvalidArgument):
    """An embedding that is not 384 finite numbers: the vectors come from another model."""

    sqlstate = "PR154"


class NameTaken(PgrecallError, ValueError):
    """add_peer: a peer whose name differs only in case (or Unicode form) exists; names are unique regardless."""

    sqlstate = "PR141"


class DuplicateDecided(ConcurrencyError):
    """decide_duplicate: someone decided this pair, at the revisions the caller saw, first."""

    sqlstate = "PR180"


class NarrowerReplacement(PgrecallError, ValueError):
    """decide_duplicate: the replacement does not reach everyone (scope, audience, purposes, perspective)
    the superseded memory reaches."""

    sqlstate = "PR181"


class NotAPair(PgrecallError, ValueError):
    """decide_duplicate: the two memories share no purpose, so they are never proposed as duplicates."""

    sqlstate = "PR182"


class UnknownErasureRequest(PgrecallError, LookupError):
    """refresh_erasure_statistics: no completed erasure request has that id."""

    sqlstate = "PR195"


class ModelMismatch(PgrecallError):
    """The tenant's embedding model is not the one this process runs (raised by the worker)."""

    sqlstate = None


class EmbeddedServerError(PgrecallError):
    """The embedded server did not start or stop; the message carries the end of its log."""

    sqlstate = None


class SchemaOutOfDate(PgrecallError):
    """The tenant's schema is older than this driver (raised by the driver)."""

    sqlstate = None


_BY_SQLSTATE: dict[str, type[PgrecallError]] = {}


def register(cls: type[PgrecallError]) -> type[PgrecallError]:
    if cls.sqlstate:
        _BY_SQLSTATE[cls.sqlstate] = cls
    return cls


def _all_subclasses(cls: type[Any]) -> list[type[Any]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_all_subclasses(sub))]


for _cls in _all_subclasses(PgrecallError):
    register(_cls)


def translate(exc: psycopg.Error) -> Exception:
    """The pgrecall exception for a server error, or the error unchanged."""
    sqlstate = getattr(exc, "sqlstate", None)
    cls = _BY_SQLSTATE.get(sqlstate or "")
    if cls is None:
        return exc
    diag = exc.diag
    hint = diag.message_hint
    if cls is NotPermitted and not hint:
        hint = ("Each duty has its own login role: pgrecall_<tenant>_app (the agent), _worker (claiming queued "
                "work) and _admin (erasure, rebuilds, settings, merges); "
                "pgrecall server uri --tenant T --role app|worker|admin prints its URI.")
    err = cls(diag.message_primary or str(exc), hint=hint)
    err.__cause__ = exc
    return err
