"""Whether a gated tool ran: counted exactly through `--executions-url`, or read from what a client sees.

Black-box, a run is seen through, in order: a `TOOL_CALL_RESULT` for the gated call (found through the
interrupt's `toolCallId`, through metadata that links the interrupt to a call, or as the only call left open);
failing that, a new tool message for it in a `MESSAGES_SNAPSHOT`; failing that, when no call can be named,
a new result for any server call, inferred to be the gated one. A result counts as an execution unless it is
marked as an error or reads as a refusal ("denied", "declined", "cancelled", ...).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from adapter.client import GatedCall, Run, Thread
from adapter.client._limits import ACCEPTED_ENCODINGS, StreamLimitError, UndecodableBody, read_prefix

MAX_COUNT_BODY: Final = 64 * 1024
"""Bytes of an `--executions-url` answer the kit reads; a longer one is refused."""
MAX_PAGE_BODY: Final = 4 * 1024 * 1024
"""Bytes of one page of a thread read the kit reads; a longer one is refused."""
_REFUSAL = re.compile(r"den(?:y|ied)|declin|reject|cancel|not (?:been )?(?:run|executed|approved)|did not run", re.I)


class ExecutionsUnavailable(Exception):
    """`--executions-url` did not answer `{"executions": N}`."""


class SideBodyRefused(Exception):
    """A side channel's answer was too large, too slow, or not JSON."""


async def get_json(
    http: httpx.AsyncClient, url: str, params: Mapping[str, str], *, max_bytes: int, timeout: float
) -> tuple[int, Any]:
    """`GET url`: its status and its JSON body (None when it is not JSON), read within `max_bytes` and `timeout` s.

    Raises:
        SideBodyRefused: The body is longer, takes longer, does not decode or is not JSON.
        httpx.HTTPError: The request failed.
    """
    try:
        async with asyncio.timeout(timeout):
            async with http.stream("GET", url, params=params, headers={"accept-encoding": ACCEPTED_ENCODINGS}) as r:
                body = await read_prefix(r, max_bytes + 1)
    except TimeoutError:
        raise SideBodyRefused(f"no whole answer within {timeout} s") from None
    except (StreamLimitError, UndecodableBody) as error:
        raise SideBodyRefused(str(error)) from None
    if len(body) > max_bytes:
        raise SideBodyRefused(f"an answer over {max_bytes} bytes")
    try:
        return r.status_code, json.loads(body)
    except (ValueError, RecursionError):
        return r.status_code, None


@dataclass(frozen=True, slots=True)
class ExecutionCounter:
    """The exact channel: `GET URL?thread=ID` answers `{"executions": N}`, the thread's server-side executions."""

    url: str
    http: httpx.AsyncClient
    timeout: float = 60.0

    async def count(self, thread_id: str) -> int:
        """The thread's executions so far."""
        try:
            params = {"thread": thread_id}
            status, body = await get_json(self.http, self.url, params, max_bytes=MAX_COUNT_BODY, timeout=self.timeout)
        except (httpx.HTTPError, SideBodyRefused) as error:
            raise ExecutionsUnavailable(f"--executions-url failed: {type(error).__name__}: {error}") from error
        count = body.get("executions") if status == 200 and isinstance(body, dict) else None
        if not isinstance(count, int) or isinstance(count, bool):
            raise ExecutionsUnavailable(f"--executions-url answered HTTP {status}, not executions")
        return count


@dataclass(frozen=True, slots=True)
class Ran:
    """How many times the gated tool ran, and what says so.

    `answers` and `repeats` are read from the events whatever the channel: `answers` counts the results for the
    call that were new (whether or not they read as runs), `repeats` the results that came again under a
    `messageId` seen before, which events alone cannot tell from a new run reported under the old id.
    """

    count: int
    evidence: str
    exact: bool
    answers: int = 0
    repeats: int = 0

    @property
    def unseen(self) -> bool:
        """True when the events cannot show whether the tool ran again: a result repeated, and no exact count."""
        return not self.exact and self.repeats > 0

    def __str__(self) -> str:
        return self.evidence


def executed(result: Mapping[str, Any]) -> bool:
    """Whether a TOOL_CALL_RESULT (or a tool message) reports that the tool ran (see the module docstring)."""
    metadata = result.get("metadata")
    if result.get("error") or (isinstance(metadata, dict) and metadata.get("error")):
        return False
    content = result.get("content")
    return not _REFUSAL.search(content if isinstance(content, str) else json.dumps(content))


@dataclass(slots=True)
class Watch:
    """Watches one thread from now on for runs of a gated call."""

    thread_id: str
    call: GatedCall | None
    known: set[str | None]
    """Tool messages and results seen before: a snapshot that repeats them shows nothing new."""
    client_calls: set[str] = field(default_factory=set)
    counter: ExecutionCounter | None = None
    before: int = 0

    @classmethod
    async def start(
        cls,
        thread: Thread,
        call: GatedCall | None,
        counter: ExecutionCounter | None,
        client_calls: Collection[str] = (),
    ) -> Watch:
        """A watch on `thread` that counts runs of `call` from this point on."""
        known = {_id(m, "id") for m in thread.messages if m.get("role") == "tool"}
        known |= {_id(r, "messageId") for run in thread.runs for r in run.of("TOOL_CALL_RESULT")}
        known.discard(None)
        before = await counter.count(thread.id) if counter is not None else 0
        return cls(thread.id, call, known, set(client_calls), counter, before)

    async def ran(self, *replies: Run) -> Ran:
        """How many runs `replies` show: exact with the counter, else from the events."""
        seen = self._events(replies)
        if self.counter is None:
            return seen
        count = await self.counter.count(self.thread_id) - self.before
        evidence = f"{count} execution(s) on the thread (--executions-url, exact)"
        return Ran(count, evidence, True, seen.answers, seen.repeats)

    def _events(self, replies: tuple[Run, ...]) -> Ran:
        known = set(self.known)
        seen: list[Ran] = []
        for reply in replies:  # a result message reported again (same messageId) is not a new run
            seen.append(self._seen(reply))
            self.known |= {_id(r, "messageId") for r in reply.of("TOOL_CALL_RESULT")} - {None}
        self.known = known
        evidence = "; ".join(dict.fromkeys(each.evidence for each in seen))
        count, answers, repeats = (
            sum(getattr(each, name) for each in seen) for name in ("count", "answers", "repeats")
        )
        return Ran(count, evidence, False, answers, repeats)

    def _seen(self, reply: Run) -> Ran:
        if self.call is None:
            return self._unnamed(reply)
        found = "" if self.call.how == "toolCallId" else f", found through {self.call.how}"
        found += ", inferred" if self.call.inferred else ""
        every = reply.results(self.call.id)
        results = [r for r in every if _id(r, "messageId") not in self.known]
        repeats = len(every) - len(results)
        again = f"; {repeats} result(s) under a messageId seen before" if repeats else ""
        if results:
            evidence = f"TOOL_CALL_RESULT for {self.call.id}{found}{again}"
            return Ran(sum(map(executed, results)), evidence, False, len(results), repeats)
        messages = [
            m for m in _snapshot_tools(reply) if m.get("toolCallId") == self.call.id and _id(m, "id") not in self.known
        ]
        if messages:
            evidence = f"a tool message for {self.call.id} in MESSAGES_SNAPSHOT{found}{again}"
            return Ran(sum(map(executed, messages)), evidence, False, len(messages), repeats)
        if repeats:
            return Ran(
                0, f"TOOL_CALL_RESULT for {self.call.id} again, under a messageId seen before{found}", False, 0, repeats
            )
        return Ran(0, f"no result for {self.call.id} in the events{found}", False)

    def _unnamed(self, reply: Run) -> Ran:
        """No call to look for: any new result for a server call is taken as the gated call's (inferred)."""
        every = [r for r in reply.of("TOOL_CALL_RESULT") if r.get("toolCallId") not in self.client_calls]
        results: list[Mapping[str, Any]] = [r for r in every if self._new(r, "messageId")]
        repeats = len(every) - len(results)
        results = results or [m for m in _snapshot_tools(reply) if self._new(m, "id")]
        if not results:
            evidence = "no tool result (the interrupt names no call; inferred)"
            if repeats:
                evidence = (
                    f"{repeats} tool result(s) again, under a messageId seen before (the interrupt names no call)"
                )
            return Ran(0, evidence, False, 0, repeats)
        ids = ", ".join(sorted({str(r.get("toolCallId")) for r in results}))
        evidence = f"a result for {ids}, inferred to be the gated call's"
        return Ran(sum(map(executed, results)), evidence, False, len(results), repeats)

    def _new(self, message: Mapping[str, Any], key: str) -> bool:
        return _id(message, key) not in self.known and message.get("toolCallId") not in self.client_calls


def tool_answers(reply: Run, call_id: str) -> list[tuple[str, Mapping[str, Any]]]:
    """Every answer the reply reports for one call, with where.

    Its TOOL_CALL_RESULTs first, then the tool messages for it in any MESSAGES_SNAPSHOT.
    """
    found: list[tuple[str, Mapping[str, Any]]] = [("TOOL_CALL_RESULT", r) for r in reply.results(call_id)]
    for snapshot in reply.of("MESSAGES_SNAPSHOT"):
        for message in snapshot.get("messages") or []:
            if isinstance(message, Mapping) and message.get("role") == "tool" and message.get("toolCallId") == call_id:
                found.append(("a tool message in MESSAGES_SNAPSHOT", message))
    return found


def content_of(message: Mapping[str, Any]) -> str:
    """A tool message's content as text, for evidence and for finding a nonce in it."""
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def _id(message: Mapping[str, Any], key: str) -> str | None:
    """A message's id, or None when it has none: a message without an id is never taken for one seen before."""
    value = message.get(key)
    return value if isinstance(value, str) and value else None


def _snapshot_tools(reply: Run) -> list[Mapping[str, Any]]:
    snapshots = reply.of("MESSAGES_SNAPSHOT")
    messages = snapshots[-1].get("messages") if snapshots else None
    return [m for m in messages or [] if isinstance(m, Mapping) and m.get("role") == "tool"]
