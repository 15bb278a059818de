"""The HTTP edge: routes, request limits and refusals, and `mount`. No agent logic lives here.

`mount` serves the mount point itself, with or without its trailing slash, without a redirect.

Refusals happen before any stream opens and are JSON bodies `{"error": {"code", "message",
"details"?}}` with a 4xx status (TRANS-8):

- 415 `UNSUPPORTED_MEDIA_TYPE`: not `application/json` (a UTF-8 charset parameter is allowed);
- 413 `CONTENT_TOO_LARGE`: declared or actual body over `max_body_bytes`;
- 422 `INVALID_INPUT`: bad JSON, or a malformed known field (pydantic errors in `details`);
- 400 `UNSUPPORTED_PROTOCOL_VERSION`: a declared major version other than 1;
- 422 `INPUT_TOO_DEEP` / `INVALID_ID` / `DUPLICATE_MESSAGE_ID`, 413 `TOO_MANY_TOOLS` / `TOOLS_TOO_LARGE`:
  over a limit (docs/security.md, "Limits");
- 422 `TOOL_NAME_CONFLICT` / `INVALID_TOOL_SCHEMA`: client tools the run cannot use;
- 400 `INVALID_PAGE`: `GET /threads/{id}` with a `limit` outside 1..1000 or an unknown `after`; `GET /threads`
  with a `limit` outside 1..100 or a `before` no listing returned; the events route with an `after` or a
  `Last-Event-ID` that is not a whole number;
- 404 `THREAD_NOT_FOUND` / `RUN_NOT_FOUND`: an unknown thread or run, and the same for one the caller may not read;
- 422 `INVALID_TITLE`: a rename's title is not a short one-line string (or null);
- 409 `THREAD_CONFLICT`: a rename that kept meeting other saves;
- 403 `THREAD_FORBIDDEN` / `APPROVAL_FORBIDDEN`: the adapter's access policy refused the caller
  (`adapter._run._access`), checked on the record the run itself loaded;
- 503 `STORE_UNAVAILABLE`: the thread could not be read;
- 500 `INTERNAL_ERROR`: a bug while starting the run (logged; the message holds nothing of it).

Each refusal is an error that carries its status (`status_code`): the edge maps none by its code.

The run starts in two phases: the edge awaits the adapter's `start`, where every refusal above is
raised, and only then opens the stream, which fails only after RUN_STARTED. The stream reads the run as
one listener among others (`adapter._sessions._journal`): the run goes on when it leaves, unless the adapter says
otherwise, and is reattached to at `GET /threads/{threadId}/runs/{runId}/events`.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeAlias
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from adapter import _errors as codes
from adapter._adapter import Adapter
from adapter._edge._input import is_json, parse_body, read_body
from adapter._edge._sse import EventStreamResponse
from adapter._errors import AdapterError, Draining, Forbidden, InputRejected, InvalidPage
from adapter._lazy import on_first_use
from adapter._limits import id_problem
from adapter._run._config import refuses_moved_options
from adapter._sessions._threads import DEFAULT_THREADS
from adapter._types import JSON
from adapter.stores import StoreUnavailable
from adapter.stores._health import Probe

if TYPE_CHECKING:
    from adapter._edge import _inspector
else:  # the dev UI's page: imported by an app that turns it on
    _inspector = on_first_use(globals(), "adapter._edge._inspector")

logger = logging.getLogger(__name__)

_PING_TIMEOUT: Final = 5.0  # seconds GET /health waits for the store before it answers 503
_MAX_PAGE: Final = 1000  # messages in one page of GET /threads/{id} (Adapter.thread's limit)
_MAX_THREADS: Final = 100  # threads in one page of GET /threads (Adapter.threads' limit)
_MAX_PATCH_BYTES: Final = 4096  # a rename's body: a title of at most 200 characters, escaped
_MAX_SEQ_DIGITS: Final = 12  # an event id (`after`, `Last-Event-ID`): far more events than a journal keeps


PrincipalOf: TypeAlias = Callable[[Request], str | None | Awaitable[str | None]]
"""Who sent a request: `principal(request) -> str | None`, sync or async."""

Refusal: TypeAlias = InputRejected | Forbidden | AdapterError
"""What refuses a request before any stream opens; each carries its HTTP status as `status_code`."""


def authenticated_user(request: Request) -> str | None:
    """The default principal: `request.user.identity` once Starlette's `AuthenticationMiddleware` authenticated it."""
    if "user" not in request.scope:
        return None
    user = request.user
    return str(user.identity) if user.is_authenticated else None


@refuses_moved_options
def create_app(
    adapter: Adapter,
    *,
    keepalive_interval: float = 15.0,
    inspector: bool = False,
    principal: PrincipalOf | None = None,
) -> Starlette:
    """Build the AG-UI sub-app, to mount anywhere: `mount("/agui", app)` in the parent app's routes.

    Routes, relative to the mount point; each answers with or without a trailing slash (no redirect),
    and `mount` serves the mount point itself (`POST /agui` as `POST /agui/`). An id in a path is
    percent-escaped as a URL component: any id `POST /` accepts reaches its routes, `/` (`%2F`) included:

    - `POST /`: run. The body is a `RunAgentInput`; the answer is `200 text/event-stream`, one
      `data:` frame per event, closed right after the terminal event. `Accept` is ignored.
    - `GET /capabilities`: `adapter.capabilities()` as JSON.
    - `GET /health`: `{"status": "ok"}`; 503 `{"status": "draining"}` once the adapter drains (`Adapter.drain`:
      a graceful stop; `POST /` then answers 503 `DRAINING` with `Retry-After`); 503
      `{"status": "unavailable", "store": "read-only"}` when the
      adapter's store answers but cannot be written, `"unreachable"` when its `ping()` fails or takes more
      than 5 s (a database that is down). Trivial queries, asked once for all the checks that come together
      and answered from the last ask for a second: cheap enough to poll under load.
    - `GET /threads/{threadId}`: the thread's stored messages (form cards included, with their
      current status), its open interrupts and its grants (`[{"tool", "grantedBy", "grantedAt"}]`), so a
      page can restore itself after a reload; 404
      for an unknown thread, and the same 404 for a thread the caller may not read; 503 `STORE_UNAVAILABLE`
      when the store cannot be reached.
      `?after=<message id>&limit=N` (either or both) returns one page of at most N messages (1 to
      1,000, default 100) after that message, and `next`, the id to ask after for the following
      page (null at the end); 400 `INVALID_PAGE` for a bad `limit` or an `after` not in the thread.
    - `GET /threads`: the caller's threads, newest first: `{"threads": [{"threadId", "title", "updatedAt",
      "interrupts"}], "next"}`; `?before=<next>&limit=N` (1 to 100, default 20) pages.
    - `PATCH /threads/{threadId}`: `{"title": "..."}` (null clears it) renames the thread: 200
      `{"threadId", "title"}`; 404 as `GET`, 403 for a caller who may read it but not run on it.
    - `DELETE /threads/{threadId}`: 204; the thread, its open turn and its runs' journals are gone.
    - `DELETE /threads/{threadId}/grants/{tool}`: 204; the thread's grant of the tool is revoked (if it had one):
      its next call asks a person. 404 as `GET`, 403 `APPROVAL_FORBIDDEN` for a caller who may read the thread
      but not approve on it.
    - `GET /threads/{threadId}/runs/{runId}/events`: the run's events as SSE, each with its `id:`; with
      `Last-Event-ID` (or `?after=N`) only those after it; then the live tail until the terminal event.
      204 when the run ended and nothing is after; 404 `RUN_NOT_FOUND` for an unknown thread or run, or
      a caller who may not read the thread.
    - `POST /threads/{threadId}/runs/{runId}/stop`: 202 `{"threadId", "runId", "stopping"}`; the run ends
      with `RUN_FINISHED` and the outcome `{"type": "cancelled"}`; 404 as the events route, 403 for a
      caller who may read the thread but not run on it.
    - `GET /inspector/`: with `inspector=True`, the agui-inspector dev UI, pointed at this sub-app.

    A body larger than the adapter's `limits.max_body_bytes` gets 413 without being read whole.

    Args:
        adapter: Runs the agent and declares its capabilities.
        keepalive_interval: Seconds of silence after which the stream sends `: keep-alive`.
        inspector: Serve the agui-inspector page (the optional `inspector` extra). For development only:
            it adds no authentication.
        principal: Who sent a request, `(Request) -> str | None`, sync or async; the adapter's
            `authorize` policy decides what they may do (docs/security.md). Default:
            `authenticated_user`, Starlette's `request.user.identity` when authenticated, else None.

    Raises:
        ValueError: `keepalive_interval` is not positive.
        TypeError: `adapter` is not an `Adapter`; or an option that moved (`max_body_bytes`: into `Limits`).
        ImportError: `inspector=True` without the agui-inspector package.
    """
    if not isinstance(adapter, Adapter):
        raise TypeError(f"create_app serves an Adapter, not {type(adapter).__name__}: wrap the agent in Adapter(...)")
    if not keepalive_interval > 0:  # also refuses NaN
        raise ValueError("keepalive_interval must be positive")
    max_body_bytes = adapter.limits.max_body_bytes

    principal_of = principal or authenticated_user

    async def run(request: Request) -> Response:
        return await _run(
            request, adapter, principal_of, max_body_bytes=max_body_bytes, keepalive_interval=keepalive_interval
        )

    async def capabilities(request: Request) -> Response:
        body = adapter.capabilities().model_dump_json(by_alias=True, exclude_none=True)
        return Response(body, media_type="application/json")

    probe = Probe(adapter.store, _PING_TIMEOUT)

    async def health(request: Request) -> Response:
        if adapter.draining:  # first: a balancer must move away even while the store is fine
            return _json_response(503, {"status": "draining"})
        said = await probe()
        if said != "ok":
            return _json_response(503, {"status": "unavailable", "store": said})
        return _json_response(200, {"status": "ok"})

    async def thread(request: Request) -> Response:
        if request.method == "PATCH":
            return await _rename(request, adapter, principal_of)
        if request.method == "DELETE":
            return await _delete(request, adapter, principal_of)
        return await _thread(request, adapter, principal_of)

    async def threads(request: Request) -> Response:
        return await _threads(request, adapter, principal_of)

    async def events(request: Request) -> Response:
        return await _events(request, adapter, principal_of, keepalive_interval=keepalive_interval)

    async def stop(request: Request) -> Response:
        return await _stop(request, adapter, principal_of)

    async def grant(request: Request) -> Response:
        return await _revoke(request, adapter, principal_of)

    routes = [
        Route("/", run, methods=["POST"]),
        Route("/capabilities", capabilities, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/threads", threads, methods=["GET"]),
        Route("/threads/{thread_id}", thread, methods=["GET", "PATCH", "DELETE"]),
        Route("/threads/{thread_id}/runs/{run_id}/events", events, methods=["GET"]),
        Route("/threads/{thread_id}/runs/{run_id}/stop", stop, methods=["POST"]),
        Route("/threads/{thread_id}/grants/{tool}", grant, methods=["DELETE"]),
        *(_inspector.inspector_routes() if inspector else []),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Served on its own (`uvicorn module:app`), the app drains when its server stops: uvicorn runs this after
        # it has closed the streams (cut or ended), while the runs go on in the adapter. A parent app that mounts
        # this one calls `drain` from its own lifespan: Starlette runs no mounted app's (docs/replicas.md).
        yield
        await adapter.drain()

    return Starlette(routes=routes, middleware=[Middleware(OneSlashForm, routes=routes)], lifespan=lifespan)


async def _run(
    request: Request, adapter: Adapter, principal_of: PrincipalOf, *, max_body_bytes: int, keepalive_interval: float
) -> Response:
    if not is_json(request.headers.get("content-type", "")):
        return _refuse(InputRejected(415, codes.UNSUPPORTED_MEDIA_TYPE, "Send the run input as application/json."))
    try:
        body = await read_body(request, max_body_bytes)
    except ClientDisconnect:
        return Response(status_code=400)  # nobody is listening; just end the exchange
    if body is None:
        return _refuse(InputRejected(413, codes.CONTENT_TOO_LARGE, f"The body exceeds {max_body_bytes} bytes."))
    try:
        checked = await parse_body(body)
    except InputRejected as rejected:
        return _refuse(rejected)
    who = await _principal(request, principal_of)
    try:
        events = await adapter.start(checked, principal=who)
    except (InputRejected, Forbidden) as refused:
        return _refuse(refused)
    except StoreUnavailable:
        logger.warning("POST /: the store could not be reached", exc_info=True)
        return _store_down()
    except Exception:
        logger.exception("POST /: the run could not start")
        message = "The run could not start because of an internal error."  # internals never reach the client
        return _json_response(500, {"error": {"code": codes.INTERNAL_ERROR, "message": message}})
    return EventStreamResponse(events.frames(), keepalive_interval=keepalive_interval)


async def _thread(request: Request, adapter: Adapter, principal_of: PrincipalOf) -> Response:
    """`GET /threads/{thread_id}`: the thread, or one page of it."""
    try:
        page = _page(request.query_params)
    except InputRejected as rejected:
        return _refuse(rejected)
    who = await _principal(request, principal_of)
    thread_id = path_id(request, "thread_id")
    try:
        found = await _read_thread(adapter, thread_id, who, page)
    except StoreUnavailable:
        logger.warning("GET /threads: the store could not be reached", exc_info=True)
        return _store_down()
    except InvalidPage as refused:
        return _refuse(refused)
    if found is None:
        return _not_found(codes.THREAD_NOT_FOUND)
    return _json_response(200, found)


async def _read_thread(adapter: Adapter, thread_id: str, who: str | None, page: Page) -> JSON:
    if id_problem(thread_id) is not None:  # an id no store can keep names no thread; the store is not asked
        return None
    return await adapter.thread(thread_id, principal=who, after=page.after, limit=page.limit)


async def _threads(request: Request, adapter: Adapter, principal_of: PrincipalOf) -> Response:
    """`GET /threads`: a page of the caller's threads, newest first."""
    query = request.query_params
    try:
        limit = _whole(query["limit"], 1, _MAX_THREADS, "limit") if "limit" in query else DEFAULT_THREADS
    except InputRejected as rejected:
        return _refuse(rejected)

    async def listed(who: str | None) -> JSON:
        return await adapter.threads(principal=who, before=query.get("before"), limit=limit)

    return await _answer(listed, request, principal_of, "GET /threads")


async def _rename(request: Request, adapter: Adapter, principal_of: PrincipalOf) -> Response:
    """`PATCH /threads/{thread_id}`: `{"title": ...}` renames the thread."""
    thread_id = path_id(request, "thread_id")
    if id_problem(thread_id) is not None:
        return _not_found(codes.THREAD_NOT_FOUND)
    if not is_json(request.headers.get("content-type", "")):
        return _refuse(InputRejected(415, codes.UNSUPPORTED_MEDIA_TYPE, "Send the change as application/json."))
    try:
        body = await read_body(request, _MAX_PATCH_BYTES)
    except ClientDisconnect:
        return Response(status_code=400)
    if body is None:
        return _refuse(InputRejected(413, codes.CONTENT_TOO_LARGE, f"The body exceeds {_MAX_PATCH_BYTES} bytes."))
    try:
        change = json.loads(body)
    except ValueError:
        change = None
    if not isinstance(change, dict) or set(change) != {"title"}:
        return _refuse(InputRejected(422, codes.INVALID_INPUT, 'Send {"title": "..."} (null clears the title).'))

    async def renamed(who: str | None) -> JSON:
        done = await adapter.rename_thread(thread_id, change["title"], principal=who)
        return {"threadId": thread_id, "title": change["title"]} if done else None

    return await _answer(renamed, request, principal_of, "PATCH /threads", missing=codes.THREAD_NOT_FOUND)


async def _delete(request: Request, adapter: Adapter, principal_of: PrincipalOf) -> Response:
    """`DELETE /threads/{thread_id}`: 204, and the thread is gone."""
    thread_id = path_id(request, "thread_id")
    if id_problem(thread_id) is not None:
        return _not_found(codes.THREAD_NOT_FOUND)

    async def deleted(who: str | None) -> JSON:
        return True if await adapter.delete_thread(thread_id, principal=who) else None

    return await _answer(deleted, request, principal_of, "DELETE /threads", missing=codes.THREAD_NOT_FOUND, empty=204)


async def _revoke(request: Request, adapter: Adapter, principal_of: PrincipalOf) -> Response:
    """`DELETE /threads/{thread_id}/grants/{tool}`: 204, and the tool asks a person again on this thread."""
    thread_id, tool = path_id(request, "thread_id"), path_id(request, "tool")
    if id_problem(thread_id) is not None:
        return _not_found(codes.THREAD_NOT_FOUND)

    async def revoked(who: str | None) -> JSON:
        done = await adapter.revoke_grant(thread_id, tool, principal=who)
        return None if done is None else True

    route = "DELETE /threads/{id}/grants"
    return await _answer(revoked, request, principal_of, route, missing=codes.THREAD_NOT_FOUND, empty=204)


async def _events(
    request: Request, adapter: Adapter, principal_of: PrincipalOf, *, keepalive_interval: float
) -> Response:
    """`GET /threads/{thread_id}/runs/{run_id}/events`: the run's events after `Last-Event-ID` (or `?after=`)."""
    try:
        after = _after(request)
    except InputRejected as rejected:
        return _refuse(rejected)
    who = await _principal(request, principal_of)
    ids = path_id(request, "thread_id"), path_id(request, "run_id")
    try:
        listener = await adapter.listen(*ids, after=after, principal=who)
    except StoreUnavailable:
        logger.warning("GET /threads/{id}/runs/{id}/events: the store could not be reached", exc_info=True)
        return _store_down()
    if listener is None:
        return _not_found(codes.RUN_NOT_FOUND)
    if listener.over:
        await listener.close(left=False)
        return Response(status_code=204)  # nothing after it, and nothing will come: an EventSource stops here
    return EventStreamResponse(listener, keepalive_interval=keepalive_interval)


async def _stop(request: Request, adapter: Adapter, principal_of: PrincipalOf) -> Response:
    """`POST /threads/{thread_id}/runs/{run_id}/stop`: 202 once the run is asked to stop."""
    thread_id, run_id = path_id(request, "thread_id"), path_id(request, "run_id")

    async def stopping(who: str | None) -> JSON:
        asked = await adapter.stop_run(thread_id, run_id, principal=who)
        return None if asked is None else {"threadId": thread_id, "runId": run_id, "stopping": asked}

    return await _answer(stopping, request, principal_of, "POST .../stop", missing=codes.RUN_NOT_FOUND, status=202)


async def _answer(
    call: Callable[[str | None], Awaitable[JSON]],
    request: Request,
    principal_of: PrincipalOf,
    route: str,
    *,
    missing: str = codes.THREAD_NOT_FOUND,
    status: int = 200,
    empty: int | None = None,
) -> Response:
    """The JSON answer of a thread route, its refusals mapped the one way every route maps them."""
    who = await _principal(request, principal_of)
    try:
        found = await call(who)
    except StoreUnavailable:
        logger.warning("%s: the store could not be reached", route, exc_info=True)
        return _store_down()
    except (InputRejected, Forbidden) as refused:
        return _refuse(refused)
    except AdapterError as error:
        if error.status_code is None:  # a failure, not a refusal: a bug, answered 500
            raise
        return _refuse(error)
    if found is None:
        return _not_found(missing)
    return Response(status_code=empty) if empty is not None else _json_response(status, found)


def _after(request: Request) -> int:
    """The last event id the reader has: `Last-Event-ID` (an EventSource sends it to reconnect), else `?after=`."""
    given = request.headers.get("last-event-id")
    if given is None:
        given = request.query_params.get("after")
    return 0 if given is None else _whole(given.strip(), 0, 10**_MAX_SEQ_DIGITS - 1, "after (or Last-Event-ID)")


def _whole(text: str, low: int, high: int, name: str) -> int:
    if not (text.isascii() and text.isdigit() and len(text) <= _MAX_SEQ_DIGITS and low <= int(text) <= high):
        raise InputRejected(400, codes.INVALID_PAGE, f"{name} must be a whole number from {low} to {high}.")
    return int(text)


def _not_found(code: str) -> Response:
    message = "No such run." if code == codes.RUN_NOT_FOUND else "No such thread."
    return _json_response(404, {"error": {"code": code, "message": message}})


async def _principal(request: Request, principal_of: PrincipalOf) -> str | None:
    who = principal_of(request)
    return await who if inspect.isawaitable(who) else who


def _page(query: Mapping[str, str]) -> Page:
    """`after` and `limit` from the query of `GET /threads/{id}`, checked; neither when neither is given."""
    after = query.get("after")
    if after is not None and not after:
        raise InputRejected(400, codes.INVALID_PAGE, "after must name a message id.")
    limit = query.get("limit")
    if limit is None:
        return Page(after, None)
    if not (limit.isascii() and limit.isdigit() and len(limit) <= 4 and 1 <= int(limit) <= _MAX_PAGE):
        raise InputRejected(400, codes.INVALID_PAGE, f"limit must be a whole number from 1 to {_MAX_PAGE}.")
    return Page(after, int(limit))


@dataclass(frozen=True, slots=True)
class Page:
    """The page `GET /threads/{id}` asks for: after which message, and how many (the whole thread without either)."""

    after: str | None
    limit: int | None


def _refuse(refused: Refusal) -> Response:
    """The refusal as its own status and `{"error": {"code", "message", "details"?}}`."""
    status = refused.status_code
    assert status is not None  # a failure, not a refusal, is never answered here (`_answer`)
    logger.info("refused a request: %s %s", status, refused.code)
    error: dict[str, JSON] = {"code": refused.code, "message": refused.message}
    if refused.details is not None:
        error["details"] = refused.details
    response = _json_response(status, {"error": error})
    if isinstance(refused, Draining):
        response.headers["Retry-After"] = str(refused.retry_after)
    return response


def _store_down() -> Response:
    message = "The store could not be reached; nothing changed. Try again later."
    return _json_response(503, {"error": {"code": codes.STORE_UNAVAILABLE, "message": message}})


def _json_response(status_code: int, content: JSON) -> Response:
    # ASCII-escaped: error details echo client input, which may hold lone surrogates.
    return Response(json.dumps(content, separators=(",", ":")), status_code=status_code, media_type="application/json")


def mount(path: str, app: ASGIApp, *, name: str | None = None) -> Mount:
    """A `Mount` that also serves its bare path: `mount("/agui", create_app(adapter))` answers `POST /agui`.

    Use it wherever Starlette's `Mount` goes: in `Starlette(routes=[...])`, or, under FastAPI,
    `app.routes.append(mount("/agui", create_app(adapter)))`. A plain `Mount` serves `/agui/` but
    leaves `/agui` to the parent app, which redirects it.
    """
    return _BareMount(path, app=app, name=name)


class _BareMount(Mount):
    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is Match.NONE and scope["type"] == "http" and self.path and get_route_path(scope) == self.path:
            # Matched as `path/`; the child keeps `path`, which the sub-app's OneSlashForm reads as `/`.
            return super().matches({**scope, "path": scope["path"] + "/"})
        return match, child_scope


class OneSlashForm:
    """ASGI middleware: a path no route matches is served as its other form (slash added or dropped) if that matches."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            escaped = _escaped_path(scope)
            if escaped != scope["path"]:
                scope = {**scope, "path": escaped}
        if scope["type"] == "http" and not self._matched(scope):
            other = _other_form(scope)
            if self._matched(other):
                scope = other
        await self.app(scope, receive, send)

    def _matched(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] is not Match.NONE for route in self.routes)


def path_id(request: Request, name: str) -> str:
    """An id from the path, whole: a `/` or `%` it holds was sent escaped, and kept so until now (`_escaped_path`)."""
    return unquote(request.path_params[name])


def _escaped_path(scope: Scope) -> str:
    """The path with `%2F` and `%25` kept escaped, so that an id holding `/` stays one path segment.

    Servers decode `%2F` before routing, so the thread `a/b` (`/threads/a%2Fb`) would otherwise match no route
    and `a/runs/b` the wrong one. The routes match this form; `path_id` decodes what they captured. Without a
    `raw_path` (it is optional in ASGI) every `%` of the decoded path is escaped instead, so `path_id` still
    gives back exactly what the path held.
    """
    path: str = scope["path"]
    raw: bytes | None = scope.get("raw_path")
    if raw is None or b"%" not in raw:  # no `%` sent, none to keep: the walk below would give this too
        return path.replace("%", "%25")
    root: str = scope.get("root_path", "")
    segments = raw.decode("latin-1").split("/")
    below = "/".join(segments[root.count("/") + 1 :]) if root and path.startswith(root) else "/".join(segments[1:])
    kept = "".join(piece.upper() if _KEPT.fullmatch(piece) else unquote(piece) for piece in _KEPT_SPLIT.split(below))
    escaped = f"{root}/{kept}" if root and path.startswith(root) else f"/{kept}"
    return escaped if unquote(escaped) == path else path.replace("%", "%25")  # a server that decodes otherwise


_KEPT = re.compile(r"%2[fF]|%25")
_KEPT_SPLIT = re.compile(r"(%2[fF]|%25)")


def get_route_path(scope: Scope) -> str:
    """The path below the mount point (`root_path`), as the routes see it; "" for the mount point itself."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _other_form(scope: Scope) -> Scope:
    path: str = scope["path"]
    route_path = get_route_path(scope)
    if route_path.endswith("/") and route_path != "/":
        return {**scope, "path": path.rstrip("/")}
    return {**scope, "path": path + "/"}
