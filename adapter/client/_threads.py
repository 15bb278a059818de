"""Threads as a resource, from the client: the sub-app's JSON routes that list, rename, delete threads, stop runs.

    GET    {mount}/threads?before=&limit=                  a page of the caller's threads, newest first, and `next`
    PATCH  {mount}/threads/{threadId}  {"title": ...}      renames it (None clears the title)
    DELETE {mount}/threads/{threadId}                      deletes it, its messages, open turn and runs' journals
    POST   {mount}/threads/{threadId}/runs/{runId}/stop    asks the run to stop: True, or False when it had ended

Any answer but the route's success raises `RequestRefused`, whatever the client's `strict` says, with the
server's `status` and `code`: 404 `THREAD_NOT_FOUND` (`RUN_NOT_FOUND` for a stop) for an unknown thread and for
one the caller may not read, 403 `THREAD_FORBIDDEN` for one they may read but not change, 422 `INVALID_TITLE`,
400 `INVALID_PAGE`. `Run` holds the answer, as it does a refused run's. An answer is read within the client's
`max_bytes` (`StreamLimitExceeded` past it); one that is not the JSON the route answers is a `ProtocolError`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final
from urllib.parse import quote

import httpx

from adapter.client._errors import ProtocolError, RequestRefused, StreamLimitExceeded
from adapter.client._limits import ACCEPTED_ENCODINGS, StreamLimitError, UndecodableBody, read_prefix
from adapter.client._run import Run

_HEADERS: Final = {"accept": "application/json", "accept-encoding": ACCEPTED_ENCODINGS}


class ThreadRoutes:
    """The thread routes of the sub-app at `base`, asked through `http`; each answer read within `max_bytes`."""

    def __init__(self, http: httpx.AsyncClient, base: str, max_bytes: int) -> None:
        self.http = http
        self.base = base.rstrip("/")
        self.max_bytes = max_bytes

    async def page(self, *, before: str | None = None, limit: int | None = None) -> dict[str, Any]:
        """One page: `{"threads": [{"threadId", "title", "updatedAt", "interrupts"}], "next"}`."""
        page, _ = await self._page(before, limit)
        return page

    async def every(self, *, limit: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """Every thread of the caller, newest first, a page of `limit` at a time.

        Raises:
            ProtocolError: A page's `next` names a page already read, or a page is empty but names a next one:
                following it would never end.
        """
        cursor: str | None = None
        followed: set[str] = set()
        while True:
            page, run = await self._page(cursor, limit)
            for listed in page["threads"]:
                yield listed
            cursor = page["next"]
            if cursor is None:
                return
            if cursor in followed or not page["threads"]:
                raise ProtocolError([f"GET /threads: the page after {cursor!r} was read already, or is empty"], run)
            followed.add(cursor)

    async def rename(self, thread_id: str, title: str | None) -> None:
        """Set the thread's title; None clears it."""
        ids = {"threadId": thread_id}
        await self._ask("PATCH", _thread(thread_id), ids, 200, content={"title": title})

    async def delete(self, thread_id: str) -> None:
        """Delete the thread: its messages, its open turn and its runs' journals."""
        await self._ask("DELETE", _thread(thread_id), {"threadId": thread_id}, 204)

    async def revoke_grant(self, thread_id: str, tool: str) -> None:
        """Revoke the thread's grant of `tool` ("always allow in this thread"): its next call asks a person again."""
        path = f"{_thread(thread_id)}/grants/{quote(tool, safe='')}"
        await self._ask("DELETE", path, {"threadId": thread_id}, 204)

    async def stop(self, thread_id: str, run_id: str) -> bool:
        """Ask the run to stop: True once asked, False when it had ended."""
        ids = {"threadId": thread_id, "runId": run_id}
        answer, run = await self._ask("POST", f"{_thread(thread_id)}/runs/{quote(run_id, safe='')}/stop", ids, 202)
        stopping = answer.get("stopping") if isinstance(answer, dict) else None
        if not isinstance(stopping, bool):
            raise ProtocolError(["POST .../stop: the answer has no `stopping` true or false"], run)
        return stopping

    async def _page(self, before: str | None, limit: int | None) -> tuple[dict[str, Any], Run]:
        params = {key: str(value) for key, value in (("before", before), ("limit", limit)) if value is not None}
        answer, run = await self._ask("GET", "/threads", {}, 200, params=params)
        threads = answer.get("threads") if isinstance(answer, dict) else None
        after = answer.get("next") if isinstance(answer, dict) else None
        if not (isinstance(threads, list) and all(isinstance(t, dict) for t in threads)):
            raise ProtocolError(["GET /threads: the answer is not {threads: [...], next}"], run)
        if after is not None and not isinstance(after, str):
            raise ProtocolError(["GET /threads: `next` is neither a cursor nor null"], run)
        return {"threads": threads, "next": after}, run

    async def _ask(
        self,
        method: str,
        path: str,
        ids: Mapping[str, str],
        success: int,
        *,
        params: Mapping[str, str] | None = None,
        content: Any = None,
    ) -> tuple[Any, Run]:
        """The route's JSON answer (None for a 204) and the `Run` that holds it; any other status is refused."""
        body = None if content is None else json.dumps(content).encode()
        headers = _HEADERS if body is None else {**_HEADERS, "content-type": "application/json"}
        request = self.http.build_request(method, self.base + path, params=params, content=body, headers=headers)
        response = await self.http.send(request, stream=True)
        run = Run(dict(ids), response.status_code, response.headers)
        try:
            run.chunks.append(await read_prefix(response, self.max_bytes + 1))
        except (StreamLimitError, UndecodableBody) as error:  # an encoding not offered, or one that does not decode
            run.stopped = "content_encoding"
            raise ProtocolError([f"{method} {path}: the answer could not be decoded ({error})"], run) from error
        finally:
            await response.aclose()
        if len(run.body) > self.max_bytes:
            run.stopped = "max_bytes"
            refusal = StreamLimitError(f"sent more than {self.max_bytes} bytes (max_bytes)")
            raise StreamLimitExceeded(refusal.told("The server"), refusal.limit, run)
        if run.status != success:
            raise RequestRefused(run)
        if success == 204:
            return None, run
        try:
            return json.loads(run.body), run
        except (ValueError, RecursionError):
            raise ProtocolError([f"{method} {path}: the answer is not JSON"], run) from None


def _thread(thread_id: str) -> str:
    return f"/threads/{quote(thread_id, safe='')}"
