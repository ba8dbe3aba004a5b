"""Exceptions raised by pgrecall, one class per SQLSTATE of the PR class.

The SQL functions raise errors with SQLSTATE class ``PR``; the driver turns
each into the class below and chains the original psycopg error, so callers
can catch on meaning and still read the server's message and hint.

The codes are listed once, in sql/errors.sql (loaded into pgrecall.error_code);
tests/test_error_codes.py holds these classes to that list. A class names its
code in its header (``sqlstate="PR104"``), which is also what registers it with
:func:`translate`, so a class cannot exist without being translated. Each class
also derives from the Python built-in that fits it (ValueError for bad input,
LookupError for not found, PermissionError for not allowed, RuntimeError for a
lost race, through ConcurrencyError), so a caller may catch either.
"""

from __future__ import annotations

from typing import Any, ClassVar

import psycopg

_BY_SQLSTATE: dict[str, type[PgrecallError]] = {}


class PgrecallError(Exception):
    """Base class of every error pgrecall raises on purpose."""

    sqlstate: ClassVar[str | None] = None

    def __init_subclass__(cls, *, sqlstate: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if sqlstate is not None:
            cls.sqlstate = sqlstate
            _BY_SQLSTATE[sqlstate] = cls

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.hint = hint

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}\nHINT: {self.hint}" if self.hint else text


class ConcurrencyError(PgrecallError, RuntimeError):
    """Another writer got there first (a revision, a lease, a decision): re-read and decide again."""


# -- the control plane (PR0xx) --------------------------------------------------------------------------


class InvalidTenantName(PgrecallError, ValueError, sqlstate="PR001"):
    """The text may not name a tenant (the message names the rule it breaks: names.py)."""


class TenantExists(PgrecallError, ValueError, sqlstate="PR002"):
    """The tenant already exists (or its schema, or one of its roles)."""


class TenantNotFound(PgrecallError, LookupError, sqlstate="PR003"):
    """No such tenant."""


class MigrationChanged(PgrecallError, sqlstate="PR004"):
    """A released migration changed after a tenant applied it."""


class MissingPrerequisite(PgrecallError, sqlstate="PR005"):
    """The server lacks a prerequisite (version, encoding, extension)."""


class InvalidSetting(PgrecallError, ValueError, sqlstate="PR006"):
    """An unknown setting, or a value it does not take."""


class SchemaTooNew(PgrecallError, sqlstate="PR007"):
    """The tenant's schema is newer than the installed sources."""


class UndeclaredDuty(PgrecallError, sqlstate="PR008"):
    """A tenant function has no row in the duty matrix (sql/duties.sql): the install stops."""


class CitusMissing(PgrecallError, sqlstate="PR009"):
    """A Citus operation (distribute_tenant, tenant_node, move_tenant) on a database without the citus extension."""


class NodeNotInCluster(PgrecallError, LookupError, sqlstate="PR010"):
    """pgrecall.move_tenant(): the node named is not an active worker of this Citus cluster; nothing moved."""


class TenantNotDistributed(PgrecallError, sqlstate="PR011"):
    """The tenant is not a distributed schema yet (pgrecall.distribute_tenant)."""


class FlushNotPermitted(PgrecallError, PermissionError, sqlstate="PR013"):
    """pgrecall.flush_erasure(): the role lacks what it needs (superuser, or pg_maintain, pg_checkpoint and EXECUTE
    on pg_switch_wal(), with the rights of the tenant's installer); the message names what is missing."""


class ErasureNotRewritten(PgrecallError, sqlstate="PR014"):
    """pgrecall.flush_erasure(): the tenant's admin has not rewritten the erasure's tables yet (rewrite_erased)."""


class ErasureRecordRefused(PgrecallError, PermissionError, sqlstate="PR015"):
    """pgrecall.record_erasure(): the calling role is not one of the tenant's own."""


class DumpVersionMismatch(PgrecallError, sqlstate="PR016"):
    """pgrecall tenant restore: the dump comes from another pgrecall release (format or schema version) than
    the server's; nothing was restored."""


class NotPermitted(PgrecallError, PermissionError, sqlstate="42501"):
    """The login role lacks the duty this call needs (e.g. erase is the admin's, claiming work the worker's)."""


# -- the tenant functions (PR1xx) -----------------------------------------------------------------------


class UnknownPeer(PgrecallError, LookupError, sqlstate="PR101"):
    """An unknown peer, or none given."""


class InvalidPurpose(PgrecallError, ValueError, sqlstate="PR102"):
    """A purpose that is not one of the tenant's, or an empty set of purposes."""


class ScopeNotAuthorised(PgrecallError, PermissionError, sqlstate="PR103"):
    """The scope is unknown, or not in the caller's authorised set."""


class MemoryNotFound(PgrecallError, LookupError, sqlstate="PR104"):
    """The memory does not exist, or the principal may not see it: the two are not told apart."""


class RevisionConflict(ConcurrencyError, sqlstate="PR105"):
    """Someone changed the memory after the caller read it."""


class EmptyIntersection(PgrecallError, ValueError, sqlstate="PR106"):
    """derive: the sources share no scope, audience or purpose."""


class InvalidArgument(PgrecallError, ValueError, sqlstate="PR107"):
    """An argument that is missing or malformed (the precise cases below refine it)."""


class MemoryNotLive(ConcurrencyError, sqlstate="PR108"):
    """The memory was superseded or forgotten (or the fact is no longer current)."""


class ObservationNotFound(PgrecallError, LookupError, sqlstate="PR109"):
    """No observation at that offset."""


class AppendOnly(PgrecallError, sqlstate="PR110"):
    """An append-only row was to be changed."""


class UnknownPredicate(PgrecallError, ValueError, sqlstate="PR111"):
    """The predicate is not in the tenant's ontology."""


class EvidenceMismatch(PgrecallError, ValueError, sqlstate="PR112"):
    """The quote is not exactly the bytes of its span, or the span is not in the observation."""


class RolePolicyViolation(PgrecallError, ValueError, sqlstate="PR113"):
    """A fact about a human peer whose only evidence is what an assistant said."""


class UnknownEntity(PgrecallError, LookupError, sqlstate="PR114"):
    """No entity has that name or alias, or the principal may see none that has: the two are not told apart."""


class FactNotFound(PgrecallError, LookupError, sqlstate="PR115"):
    """The fact does not exist, or the principal may not see it."""


class WiderThanEvidence(PgrecallError, ValueError, sqlstate="PR116"):
    """A memory or a fact would reach peers that a turn it cites does not: narrow its audience, or widen it on
    purpose with a widening reason."""


class AudienceOutsideSession(PgrecallError, ValueError, sqlstate="PR117"):
    """A turn's audience names a peer who is not in its session (a turn is seen by at most who is there)."""


class UnknownSession(PgrecallError, LookupError, sqlstate="PR120"):
    """No such session, or an observation names a session of another scope."""


class SessionFull(PgrecallError, sqlstate="PR121"):
    """The session already holds max_peers_in_session peers."""


class NotInSession(PgrecallError, LookupError, sqlstate="PR122"):
    """The peer is not (or no longer) in the session."""


class LeaseLost(ConcurrencyError, sqlstate="PR123"):
    """The task is not leased with this token (the lease expired and it was claimed again, or it is finished)."""


class UnknownTask(PgrecallError, LookupError, sqlstate="PR124"):
    """No queued task has that id."""


class MessageSearchOff(PgrecallError, sqlstate="PR130"):
    """search_messages: the tenant switched off every arm the call asked for."""


class UnknownScope(ScopeNotAuthorised, LookupError, sqlstate="PR131"):
    """No scope of that name exists in the tenant: a precise case of ScopeNotAuthorised (``except
    ScopeNotAuthorised`` still catches it), and a LookupError, so the command line exits 4 (not found)."""


class InvalidName(InvalidArgument, sqlstate="PR140"):
    """A peer or scope name breaks the name rules (control, format or invisible characters, odd spacing,
    mixed Latin/Cyrillic/Greek letters in a word, length). An InvalidArgument, as it was before it had a code."""


class NameTaken(PgrecallError, ValueError, sqlstate="PR141"):
    """add_peer: a peer whose name differs only in case (or Unicode form) exists; names are unique regardless."""


class OutOfRange(InvalidArgument, sqlstate="PR150"):
    """A number outside its range: a limit, hops, a confidence, an id or an offset (bigger than a bigint too)."""


class TextTooLong(InvalidArgument, sqlstate="PR151"):
    """A text longer than its limit (some limits are tenant settings, named in the hint)."""


class InvalidTime(InvalidArgument, sqlstate="PR152"):
    """A time that is infinite or outside years 1 to 9999 (what ISO 8601 and Python's datetime hold),
    or an empty time range."""


class InvalidSelector(InvalidArgument, sqlstate="PR153"):
    """erase: the selector is not one of the four shapes (observation, data_subject, peer, scope)."""


class WrongDimensions(InvalidArgument, sqlstate="PR154"):
    """An embedding that is not 384 finite numbers: the vectors come from another model."""


class WrongEmbeddingStamp(InvalidArgument, sqlstate="PR155"):
    """remember() was given vectors stamped with another model or input version than the tenant embeds with:
    they would be of another text or another space than the tenant's other vectors."""


class InvalidNamespace(InvalidArgument, sqlstate="PR160"):
    """A store namespace that is not 1 to 16 non-empty labels without a dot (or one under "langgraph")."""


class ValueNotObject(InvalidArgument, sqlstate="PR161"):
    """A store value that is not a JSON object."""


class StoreKeyTaken(PgrecallError, ValueError, sqlstate="PR162"):
    """The store key is held by an item that may not be used for every purpose of the put."""


class DuplicateDecided(ConcurrencyError, sqlstate="PR180"):
    """decide_duplicate: someone decided this pair, at the revisions the caller saw, first."""


class NarrowerReplacement(PgrecallError, ValueError, sqlstate="PR181"):
    """decide_duplicate: the replacement does not reach everyone (scope, audience, purposes, perspective)
    the superseded memory reaches."""


class NotAPair(PgrecallError, ValueError, sqlstate="PR182"):
    """decide_duplicate: the two memories share no purpose, so they are never proposed as duplicates."""


class UnknownErasureRequest(PgrecallError, LookupError, sqlstate="PR195"):
    """refresh_erasure_statistics: no completed erasure request has that id."""


# -- raised by the Python side alone (no SQLSTATE) ------------------------------------------------------


class ModelMismatch(PgrecallError):
    """The tenant's embedding model is not the one this process runs (raised by the worker)."""


class ServerAtCapacity(PgrecallError, ConnectionError):
    """The server refused a connection for want of a slot (max_connections, or the role's CONNECTION LIMIT):
    nothing was sent. Retry later, or put a pooler in front."""


class NodeUnavailable(PgrecallError, ConnectionError):
    """Citus: the worker holding the tenant could not be reached through the coordinator (the message names the
    node). Nothing of the call was done; tenants on the other workers keep answering. Retry once the node is back
    (or its standby promoted and named to Citus with citus_update_node)."""

    def __init__(self, message: str, *, node: str, hint: str | None = None):
        super().__init__(message, hint=hint)
        self.node = node


class EmbeddedServerError(PgrecallError):
    """The embedded server did not start or stop; the message carries the end of its log."""


class SchemaOutOfDate(PgrecallError):
    """The tenant's schema is older than this driver (raised by the driver)."""


def _all_subclasses(cls: type[Any]) -> list[type[Any]]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_all_subclasses(sub))]


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
