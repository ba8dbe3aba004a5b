"""``pgrecall review``: the screen where a person decides about proposed duplicates.

The database proposes pairs (``duplicate_proposals_answer``) and records decisions
(``decide_duplicate``); this app only shows one and posts the other. It logs in as
the tenant's application role, serves 127.0.0.1 only, renders on the server with
Jinja2 (autoescaping on: memory text is user input) and runs no JavaScript.

Forms carry a CSRF token: the browser holds a random id in a SameSite=Strict,
HttpOnly cookie, and each form an HMAC of that id under a secret drawn when the
app starts; a POST whose token does not match (or whose Origin is another site)
is refused with 403 and changes nothing. Requests naming another Host are
refused too, so a page that rebinds its DNS name to 127.0.0.1 cannot read the
screen.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from .. import errors

if TYPE_CHECKING:  # the web stack is an extra: imported when an app is made
    from psycopg_pool import ConnectionPool
    from starlette.applications import Starlette
    from starlette.datastructures import FormData
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from ..driver import Memory

HERE = Path(__file__).resolve().parent
COOKIE = "pgrecall_review"
# The buttons: (value, decision, which memory is retired: "a" or "b")
ACTIONS = {
    "distinct": ("distinct", None),
    "supersede-a": ("supersede", "a"),  # b replaces a
    "supersede-b": ("supersede", "b"),  # a replaces b
    "forget-a": ("forget", "a"),
    "forget-b": ("forget", "b"),
}
DONE = {"distinct": "kept both", "supersede": "superseded", "forget": "forgot"}
# Errors a reviewer can cause, and the HTTP status each answers with.
STATUS = {
    errors.DuplicateDecided: 409, errors.RevisionConflict: 409, errors.MemoryNotLive: 409,
    errors.MemoryNotFound: 404, errors.NarrowerReplacement: 400, errors.NotAPair: 400,
    errors.InvalidArgument: 400,
}
SECURITY_HEADERS = {
    # No script at all, styles from this app only, forms post only here, never framed.
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser sends "Origin: null" with the screen's own
    # form posts, and the Origin check below could not tell them from a post by an opaque (sandboxed) page.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # the page holds memory text
}


def missing_dependencies() -> str | None:
    """None when the web stack is installed, else the pip command that installs it."""
    try:
        import jinja2  # noqa: F401
        import multipart  # noqa: F401  (python-multipart: Starlette's form parser)
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"the review screen needs {exc.name}: pip install 'pgrecall[review]'"
    return None


@dataclass(frozen=True)
class Reviewer:
    tenant: str
    principal: str
    scopes: list[str]


def _csrf_token(secret: bytes, browser_id: str) -> str:
    return hmac.new(secret, browser_id.encode(), hashlib.sha256).hexdigest()


def _when(value: datetime | str | None) -> str:
    """A timestamp as a person reads it: 2026-05-03 14:02 UTC (JSON holds ISO strings, rows datetimes)."""
    if value is None:
        return ""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.strftime("%Y-%m-%d %H:%M %Z").strip()


def _browser_id(request: Request) -> tuple[str, bool]:
    """The browser's random id from its cookie, or a new one (True: set the cookie)."""
    current = request.cookies.get(COOKIE, "")
    if len(current) == 43 and current.replace("-", "").replace("_", "").isalnum():
        return current, False
    return secrets.token_urlsafe(32), True


def _done_message(request: Request) -> str | None:
    q = request.query_params
    how, a, b = q.get("done"), q.get("a", ""), q.get("b", "")
    if how not in DONE or not a.isdigit() or not b.isdigit():
        return None
    if how == "distinct":
        return f"Memories {a} and {b}: kept both; this pair will not be proposed again unless one changes."
    if how == "supersede":
        return f"Memory {a} is superseded by memory {b}."
    return f"Memory {a} is forgotten; memory {b} stays."


def _refusal(request: Request, form: FormData, secret: bytes) -> str | None:
    """Why a posted form is refused (another site's, or without this browser's CSRF token), or None."""
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        return "this form was sent from another site"
    ident = request.cookies.get(COOKIE)
    token = form.get("csrf_token")
    if not ident or not isinstance(token, str) or not hmac.compare_digest(token, _csrf_token(secret, ident)):
        return "the form's CSRF token is missing or does not match this browser"
    return None


def _decision(form: FormData) -> tuple[str, int, int, int, int] | None:
    """The decision a form asks for (decision, a, b, revision_a, revision_b: the retired memory first),
    or None when the form is incomplete."""
    try:
        decision, retired = ACTIONS[str(form.get("decision"))]
        a, b = int(str(form.get("a", ""))), int(str(form.get("b", "")))
        revision_a, revision_b = int(str(form.get("revision_a", ""))), int(str(form.get("revision_b", "")))
    except (KeyError, TypeError, ValueError):
        return None
    if retired == "b":  # the decision names the retired memory first
        return decision, b, a, revision_b, revision_a
    return decision, a, b, revision_a, revision_b


def _open_memory(tenant: str, principal: str, scopes: Sequence[str], conninfo: str | None,
                 pool: ConnectionPool[Any] | None) -> tuple[Memory, ConnectionPool[Any]]:
    """The principal's memory on the caller's pool, or on a pool opened here (closed again if that fails)."""
    from psycopg_pool import ConnectionPool

    import pgrecall

    from .. import db

    owns_pool = pool is None
    if pool is None:
        pool = ConnectionPool(conninfo or db.tenant_conninfo(tenant, "app"), min_size=1, max_size=4,
                              kwargs={"autocommit": True, "application_name": "pgrecall review"},
                              configure=pgrecall.configure, open=True)
    used: ConnectionPool[Any] = pool
    try:
        return pgrecall.connect(tenant=tenant, pool=used, principal=principal, scopes=scopes), used
    except BaseException:
        if owns_pool:
            used.close()
        raise


async def _stylesheet(request: Request) -> Response:
    from starlette.responses import FileResponse

    return FileResponse(HERE / "static" / "review.css", media_type="text/css",
                        headers={"X-Content-Type-Options": "nosniff"})


def _starlette(routes: list[Route], allowed_hosts: Sequence[str], owned: ConnectionPool[Any] | None) -> Starlette:
    """The app: its routes behind the trusted-host check; a pool it opened is closed when it stops."""
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        if owned is not None:
            owned.close()

    return Starlette(routes=routes, middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))],
                     lifespan=lifespan)


def create_app(tenant: str, principal: str, scopes: Sequence[str], *, conninfo: str | None = None,
               pool: ConnectionPool[Any] | None = None, secret: bytes | None = None,
               allowed_hosts: Sequence[str] = ("127.0.0.1", "localhost"), limit: int = 20) -> Starlette:
    """The review app for one principal over its authorised scopes.

    With ``pool`` the caller's psycopg pool is used; otherwise one is opened on ``conninfo`` (default: the
    tenant's application role, as every pgrecall command resolves it) and closed with the app.
    """
    from ..names import check_tenant_name

    check_tenant_name(tenant)  # before anything is imported, opened or composed
    import jinja2
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import HTMLResponse, RedirectResponse
    from starlette.routing import Route
    from starlette.templating import Jinja2Templates

    reviewer = Reviewer(tenant, principal, list(scopes))
    secret = secret or secrets.token_bytes(32)
    owns_pool = pool is None
    memory, used = _open_memory(tenant, principal, scopes, conninfo, pool)
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["when"] = _when
    templates = Jinja2Templates(env=env)

    def page(request: Request, *, status: int = 200, error: str | None = None, hint: str | None = None,
             done: str | None = None) -> Response:
        ident, new = _browser_id(request)
        answer = memory.duplicate_proposals(limit=limit)
        response = templates.TemplateResponse(request, "review.html", {
            "who": reviewer, "pairs": answer.pairs, "meta": answer.meta, "csrf_token": _csrf_token(secret, ident),
            "error": error, "hint": hint, "done": done,
        }, status_code=status, headers=SECURITY_HEADERS)
        if new:
            response.set_cookie(COOKIE, ident, httponly=True, samesite="strict", path="/")
        return response

    async def index(request: Request) -> Response:
        return await run_in_threadpool(page, request, done=_done_message(request))

    def refused(reason: str) -> Response:
        return HTMLResponse(templates.get_template("refused.html").render(reason=reason), status_code=403,
                            headers=SECURITY_HEADERS)

    async def decide(request: Request) -> Response:
        form = await request.form()
        refusal = _refusal(request, form, secret)
        if refusal is not None:
            return refused(refusal)
        chosen = _decision(form)
        if chosen is None:
            return await run_in_threadpool(page, request, status=400,
                                           error="The form is incomplete: pick a decision on a pair.")
        decision, a, b, revision_a, revision_b = chosen
        reason = str(form.get("reason", ""))

        def run() -> Response:
            try:
                memory.decide_duplicate(a, b, decision, reason=reason, revision_a=revision_a, revision_b=revision_b)
            except errors.PgrecallError as exc:
                return page(request, status=STATUS.get(type(exc), 400), error=str(exc.args[0]), hint=exc.hint)
            return RedirectResponse("/?" + urlencode({"done": decision, "a": a, "b": b}), status_code=303,
                                    headers=SECURITY_HEADERS)

        return await run_in_threadpool(run)

    app = _starlette([Route("/", index), Route("/decide", decide, methods=["POST"]),
                      Route("/review.css", _stylesheet)], allowed_hosts, used if owns_pool else None)
    app.state.memory = memory
    app.state.pool = pool
    return app


def serve(tenant: str, principal: str, scopes: Sequence[str], *, port: int = 8765) -> None:
    """``pgrecall review``: serve the screen on 127.0.0.1 until interrupted."""
    import uvicorn

    app = create_app(tenant, principal, scopes)
    try:
        # Fail now, in the terminal, if the principal or a scope is wrong, not on the first page load.
        app.state.memory.duplicate_proposals(limit=1)
    except BaseException:
        app.state.pool.close()
        raise
    print(f"pgrecall review: http://127.0.0.1:{port}/  (tenant {tenant}, as {principal}, scopes "
          f"{','.join(scopes)}; Ctrl-C stops)", flush=True)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
