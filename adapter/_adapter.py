"""The engine's configuration, and the object the HTTP layer serves."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from datetime import datetime, timedelta
from importlib import metadata
from typing import TYPE_CHECKING, Any, Final

from ag_ui.core import BaseEvent, RunAgentInput
from ag_ui.core.capabilities import (
    AgentCapabilities,
    ExecutionCapabilities,
    HumanInTheLoopCapabilities,
    IdentityCapabilities,
    MultimodalCapabilities,
    MultimodalInputCapabilities,
    ReasoningCapabilities,
    StateCapabilities,
    ToolsCapabilities,
    TransportCapabilities,
)

from adapter import stores
from adapter._errors import ConfigurationError, Draining
from adapter._lazy import on_first_use
from adapter._limits import CheckedInput, check_id, check_run_input
from adapter._run._access import Access, Authorize, owner_only
from adapter._run._config import (
    EngineConfig,
    HistoryMode,
    Limits,
    OnDisconnect,
    UnknownResumeEntries,
    check_backend,
    check_options,
    checked_predictions,
    refuses_moved_options,
)
from adapter._run._events import Listener
from adapter._run._forms import FormDefinition, UserInputTool
from adapter._run._interrupts import InterruptPolicy
from adapter._run._runner import Run
from adapter._run._tools import BaseTool, FrontendOutcome, check_unique
from adapter._sessions import _threads
from adapter._sessions._journal import JournalLimits, Journals, RunEvents
from adapter._sessions._journal import Listener as EventReader
from adapter._state._predict import PredictState
from adapter._thread._conversation import HistoryView
from adapter.backends._seam import Backend
from adapter.stores import JournalEvent, TurnStore
from schema_tools import STRICT_TOOL_POLICY, SchemaPolicy

if TYPE_CHECKING:
    from adapter._sessions import _feed, _reattach, _thread_api
    from adapter._sessions._thread_api import EntryLike
else:  # the thread API, reattaching and following other replicas' runs: imported when first used, never by a plain run
    _feed = on_first_use(globals(), "adapter._sessions._feed")
    _reattach = on_first_use(globals(), "adapter._sessions._reattach")
    _thread_api = on_first_use(globals(), "adapter._sessions._thread_api")

log = logging.getLogger("adapter")


REATTACH_EXTENSION: Final = {
    "route": "GET {mount}/threads/{threadId}/runs/{runId}/events",
    "resumeFrom": "Last-Event-ID",
    "binding": "an extension beside AG-UI's HTTP + SSE binding: each event is sent with its number as the SSE id",
}
"""What `capabilities().custom["reattach"]` declares: where a run's stream is taken up again after a drop."""


class Adapter:
    """Puts AG-UI in front of an agent backend: frontend tools, interrupts, resume, approvals.

    Args:
        backend: The agent: anything with `stream(ModelRequest)`.
        tools: Server tools (`@tool` functions) and control tools such as `UserInputTool`.
        forms: Shorthand for adding `UserInputTool(forms)`.
        store: Where suspended turns wait; an in-memory store when None.
        frontend_outcome: How a call to a client tool ends the run: "pending" (the default, AG-UI 1.0
            FE-2: a success outcome with `pendingToolCallIds`, answered by a ToolMessage in the next
            input) or "interrupt" (an interrupt outcome, answered by a resume entry, for clients that
            answer client tools with `resume`). Approvals, forms and a backend's interrupts are
            interrupts either way.
        frontend_outcome_overrides: The same choice for single tools, by name.
        approve_with_edits: Offer `editedArgs` in approval interrupts.
        limits: Every bound the adapter keeps, grouped (`Limits`): steps, tool calls, client tools, state, journals,
            bodies, and how long a run, an interrupt, a claim and a drain may last; the defaults when None.
        listeners: Called with a `TurnEvent` as turns start, suspend, resume and end.
        client_tool_policy: What a client tool's parameter schema and `metadata.resultSchema` must meet
            (`schema_tools.check_schema`; a result schema's root need not be an object); an input with a
            tool that fails it is refused with 422 `INVALID_TOOL_SCHEMA` before any event. None accepts
            any schema (patterns are still matched in linear time).
        predict_state: Tools (server or client) whose arguments write part of the shared state: the
            state shows them while the model streams them, and keeps them if the call succeeds
            (docs/tools.md, "Predictive state updates").
        history: Who keeps the conversation. "client" (the default): each input's `messages` are the
            history, as AG-UI clients send it; the store keeps only what it lacks. "server": the stored
            conversation is the history, and an input's `messages` only add the ones the store does not
            hold (by message id), so a client may send just its new message (docs/stores.md).
        history_view: `view(history) -> messages`, called before each model step with the whole
            history: the messages the model sees of a long thread, e.g. the last turns and a summary
            (docs/stores.md, "Long threads"). A kept tool call keeps its answer, a dropped call's answer
            is dropped, activity messages never reach the model. None (the default): all of it. With
            `history="server"`, a view's `tail` attribute bounds what a new run reads (docs/stores.md).
        authorize: `authorize(principal, owner, action) -> bool`, sync or async: may `principal` (who
            sent the request, see `create_app`) take `action` ("read", "run", "resume" or "approve") on
            a thread owned by `owner` (the principal of the run that created it, or None)? The default
            allows iff `owner is None or principal == owner`. See docs/security.md.
        on_disconnect: What a run does when the client that started it leaves: "continue" (the default) goes
            on, its events journaled for a reattach (`GET /threads/{threadId}/runs/{runId}/events`,
            `run_events`); "stop" stops it once no one reads it, as a stop request does: it ends at its next safe
            point with what it did stored and `RUN_INTERRUPTED` (a resume records it). Either way its events are
            journaled and sent with ids.
        unknown_resume_entries: What a resume entry naming no interrupt of the thread gets: "refuse" (the
            default, `RESUME_UNKNOWN_INTERRUPT`) or "warn": left out, the run goes on without it and says so in a
            `CUSTOM` event named `warning` (AG-UI 1.1; a 1.0 client passes a CUSTOM event by).
        name: The agent's name in `capabilities()` (AG-UI's `identity.name`); the backend's class name when None.
        description: What the agent does, for `identity.description`.
    """

    @refuses_moved_options
    def __init__(
        self,
        backend: Backend,
        *,
        tools: Iterable[BaseTool] = (),
        forms: Iterable[FormDefinition] = (),
        store: TurnStore | None = None,
        frontend_outcome: FrontendOutcome = "pending",
        frontend_outcome_overrides: Mapping[str, FrontendOutcome] | None = None,
        approve_with_edits: bool = True,
        limits: Limits | None = None,
        listeners: Iterable[Listener] = (),
        client_tool_policy: SchemaPolicy | None = STRICT_TOOL_POLICY,
        predict_state: Iterable[PredictState] = (),
        history: HistoryMode = "client",
        history_view: HistoryView | None = None,
        authorize: Authorize | None = None,
        on_disconnect: OnDisconnect = "continue",
        unknown_resume_entries: UnknownResumeEntries = "refuse",
        name: str | None = None,
        description: str | None = None,
    ) -> None:
        overrides = dict(frontend_outcome_overrides or {})
        limits = Limits() if limits is None else limits
        check_backend(backend)
        if not isinstance(limits, Limits):
            raise ConfigurationError(
                f"limits must be a Limits (from adapter import Limits), not {type(limits).__name__}"
            )
        check_options(
            (frontend_outcome, *overrides.values()), history, history_view, on_disconnect, unknown_resume_entries
        )
        registered = list(forms)
        self.limits = limits
        """The bounds this adapter keeps (`Limits`); the HTTP edge reads `max_body_bytes` from it."""
        self.config = EngineConfig(
            backend=backend,
            tools=tuple(check_unique([*tools, *([UserInputTool(registered)] if registered else [])])),
            store=store if store is not None else stores.MemoryStore(),
            policy=InterruptPolicy(frontend_outcome, overrides, approve_with_edits, limits.interrupt_ttl),
            max_steps=limits.max_steps,
            max_tool_calls=limits.max_tool_calls,
            listeners=tuple(listeners),
            claim_lease=limits.claim_lease,
            client_tool_policy=client_tool_policy,
            predictions=checked_predictions(predict_state),
            client_tool_limits=limits.client_tools(),
            max_state_bytes=limits.max_state_bytes,
            history=history,
            history_view=history_view,
            access=Access(authorize or owner_only),
            on_disconnect=on_disconnect,
            unknown_resume_entries=unknown_resume_entries,
        )
        """The engine's frozen configuration, which every run reads."""
        config = self.config
        self.journals = Journals(
            config.store,
            limits=JournalLimits(
                limits.max_journal_events,
                limits.max_journal_chars,
                None if limits.max_run_time is None else limits.max_run_time.total_seconds(),
                limits.max_detached_runs,
            ),
            stop_on_leave=config.on_disconnect == "stop",
            keep=config.background.keep,
        )
        """The runs this adapter drives, and their journals (`adapter._sessions._journal`)."""
        self.identity = IdentityCapabilities(
            name=name or type(backend).__name__,
            type="agui-adapter",
            description=description,
            version=_version(),
        )
        """Who answers: `capabilities().identity`."""
        self._drained: asyncio.Future[None] | None = None

    @functools.cached_property
    def feeds(self) -> _feed.Feeds:
        """The journals of runs other replicas drive that this one follows for its readers (`_sessions._feed`).

        Made by the first reader that reattaches (`listen`): an adapter that is never read that way never imports it.
        """
        return _feed.Feeds(self.config.store, claim_lease=self.config.claim_lease, clock=self.config.now)

    @property
    def backend(self) -> Backend:
        """The agent backend."""
        return self.config.backend

    @property
    def store(self) -> TurnStore:
        """Where suspended turns wait."""
        return self.config.store

    @property
    def tools(self) -> list[BaseTool]:
        """The server and control tools, forms' `request_user_input` included."""
        return list(self.config.tools)

    async def run(self, run_input: RunAgentInput, *, principal: str | None = None) -> AsyncIterator[BaseEvent]:
        """Run the agent for one input: RUN_STARTED, the run's events, one terminal event.

        `principal` sent the input; the `authorize` policy is asked before RUN_STARTED. An input without
        `protocolVersion` (a client older than AG-UI 1.0) gets the lossless downgrade of `adapter._compat`.
        `start` is the same run in two phases: its refusals come before any event is asked for. The run is
        driven by a task of the adapter: leaving the loop early leaves it running, unless `on_disconnect="stop"`.

        Raises:
            Forbidden: At the first iteration, when the policy refuses; nothing was run or stored.
            InputRejected: At the first iteration, as over HTTP; nothing was run or stored: `LimitExceeded`
                when the input's client tools are over `max_client_tools` or `max_client_tool_bytes` (413),
                or it breaks the nesting or id rules of `adapter._limits` (422 `INPUT_TOO_DEEP`, `INVALID_ID`,
                `DUPLICATE_MESSAGE_ID`); 422 `TOOL_NAME_CONFLICT` or `INVALID_TOOL_SCHEMA` for client tools
                the run cannot use.
            StoreUnavailable: At the first iteration, when the thread cannot be read; nothing changed.
        """
        async with aclosing(await self.start(run_input, principal=principal)) as events:
            async for event in events:
                yield event

    async def start(self, run_input: RunAgentInput | CheckedInput, *, principal: str | None = None) -> RunEvents:
        """Check, authorize and load one run; then drive it, and return its events, from RUN_STARTED to the end.

        An input the HTTP edge parsed comes as a `CheckedInput`, which passed the nesting and id rules there; it
        is not walked again unless code read it since (and so may have changed it); any other input is checked.
        The run is driven by a task of the adapter and journaled (`adapter._sessions._journal`): the returned events are
        one reader of it, from their first read. Closing them early leaves the run going with
        `on_disconnect="continue"`, and ends it with "stop". Dropped unread (neither iterated nor closed), they leave
        the run with no reader: with "continue" it goes on to its end, and counts against `max_detached_runs`
        meanwhile; with "stop" nothing of it runs until a reader reads it (these events, or a reattached reader), it
        counts against `max_detached_runs` meanwhile, and `drain` drops it at once, its journal ended
        `RUN_INTERRUPTED` (docs/thread-api.md, "Runs: reattach and stop").

        Raises:
            Forbidden: When the policy refuses; nothing was run or stored.
            InputRejected: As for `run`; nothing was run or stored.
            StoreUnavailable: When the thread cannot be read; nothing changed.
        """
        if self._drained is not None:
            raise Draining()
        unchanged = run_input.unread() if isinstance(run_input, CheckedInput) else None
        if unchanged is not None:
            run_input = unchanged  # as the edge checked it: nothing read it since, so nothing changed it
        else:
            run_input = run_input.input if isinstance(run_input, CheckedInput) else run_input
            check_run_input(run_input)
        journals = self.journals
        journals.check_detached(principal)
        run = Run(self.config, run_input, principal)
        events = await run.start(journals.first_name)
        ids = run_input.thread_id, run_input.run_id
        life = run.handle.incarnation
        return await journals.begin(
            *ids,
            events,
            run.stop,
            incarnation=life,
            principal=principal,
            opens=run.open_journal,
            binds=run.bind_journal,
        )

    def capabilities(self) -> AgentCapabilities:
        """What this adapter does, in AG-UI's `AgentCapabilities` shape."""
        return AgentCapabilities(
            identity=self.identity,
            # AG-UI 1.1 lets an agent declare `resumable` for a transport of its own: the reattach route is one, an
            # extension beside the standard SSE binding, which resumes nothing (`custom.reattach` says where).
            transport=TransportCapabilities(streaming=True, resumable=True),
            tools=ToolsCapabilities(
                supported=True,
                items=[tool.spec() for tool in self.config.tools],
                parallel_calls=True,
                client_provided=True,
            ),
            # Persistent: a durable store keeps each turn's state with the turn (the in-memory store does not).
            state=StateCapabilities(
                snapshots=True, deltas=True, persistent_state=not isinstance(self.config.store, stores.MemoryStore)
            ),
            # Reasoning streams, is stored and goes back with its encrypted values; every typed input part is
            # kept and reaches the backend as it came (which parts a model takes is the backend's to say).
            reasoning=ReasoningCapabilities(supported=True, streaming=True, encrypted=True),
            multimodal=MultimodalCapabilities(
                input=MultimodalInputCapabilities(image=True, audio=True, video=True, pdf=True, file=True)
            ),
            execution=ExecutionCapabilities(max_iterations=self.config.max_steps),
            human_in_the_loop=HumanInTheLoopCapabilities(
                supported=True,
                interrupts=True,
                approvals=True,
                approve_with_edits=self.config.policy.approve_with_edits,
            ),
            custom={"reattach": REATTACH_EXTENSION},
        )

    async def resume(
        self,
        thread_id: str,
        entries: Iterable[EntryLike],
        *,
        metadata: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        principal: str | None = None,
    ) -> AsyncIterator[BaseEvent]:
        """Answer a suspended turn and continue it now: the Python way to answer, beside a `resume` input over HTTP.

        `entries` are `ResumeEntry`s or mappings, addressed by `interruptId` or by `actionId` (the tool call id a
        form card shows); `metadata` carries audit fields (`submittedBy`, `requestId`) into every entry. `principal`
        answers, under the `authorize` policy, as in `run` (which raises `Forbidden`). The run is driven by a task of
        the adapter, as `run`'s is: a caller that stops reading early (a webhook that answers and returns) leaves it
        going on, unless `on_disconnect="stop"`.

        Raises:
            LimitExceeded: 422 `INVALID_ID` for a thread id no store can keep, before the store is asked;
                the run checks the rest as `run` does.
            Forbidden: `principal` may not read the thread: refused having read only its owner, before any
                answer or action id is looked at.
        """
        check_id(thread_id, "/threadId")
        run_input = await _thread_api.resume_input(self.config, thread_id, entries, metadata, principal, run_id)
        async for event in self.run(run_input, principal=principal):
            yield event

    async def thread(
        self, thread_id: str, *, principal: str | None = None, after: str | None = None, limit: int | None = None
    ) -> dict[str, Any] | None:
        """The thread's stored messages (form cards with their status), open interrupts and grants.

        `grants` lists the tools a person allowed for the rest of the thread: `[{"tool", "grantedBy", "grantedAt"}]`.

        With `after` (a message id) or `limit`, one page: at most `limit` messages (default 100, at
        most 1,000) after the message `after` (from the first without it), and `next`, the id to pass
        as `after` for the following page (None at the end).

        None for an unknown thread, and for one the `authorize` policy does not let `principal` "read".

        Raises:
            ValueError: `limit` is not from 1 to 1,000.
            AdapterError: INVALID_PAGE when `after` names no message of the thread (an id no store can keep
                names none, and the store is not asked).
            LimitExceeded: 422 `INVALID_ID` for a thread id no store can keep; the store is not asked.
        """
        page = None
        if after is not None or limit is not None:
            page = _thread_api.Page(after, _thread_api.DEFAULT_PAGE if limit is None else limit)
        return await _thread_api.read_thread(self.config, thread_id, principal, page)

    async def revoke_grant(self, thread_id: str, tool: str, *, principal: str | None = None) -> bool | None:
        """Take back the thread's grant of `tool` ("always allow in this thread"): `DELETE .../grants/{tool}`.

        Its next call asks a person again. True when a grant was revoked, False when the thread had none for
        the tool, None as `thread` is None (an unknown thread, or one `principal` may not read).

        Raises:
            Forbidden: APPROVAL_FORBIDDEN when `principal` may read the thread but not "approve" on it (who may
                grant is who may approve, and so is who may revoke); nothing changed.
            AdapterError: THREAD_CONFLICT when the thread kept changing meanwhile; nothing was revoked.
            LimitExceeded: 422 `INVALID_ID` for a thread id no store can keep; the store is not asked.
        """
        return await _thread_api.revoke_grant(self.config, thread_id, tool, principal)

    async def cancel_turn(self, thread_id: str, *, principal: str | None = None) -> bool:
        """Abandon the thread's open turn: nothing runs, form cards move to CANCELLED. False if none.

        Raises:
            Forbidden: The `authorize` policy refuses `principal` what a resume cancelling every open call
                needs ("resume", and "approve" for each approval it cancels), as `run` would; nothing changed.
            LimitExceeded: 422 `INVALID_ID` for a thread id no store can keep; the store is not asked.
        """
        return await _thread_api.cancel_turn(self.config, thread_id, principal)

    async def threads(
        self, *, principal: str | None = None, before: str | None = None, limit: int = _threads.DEFAULT_THREADS
    ) -> dict[str, Any]:
        """The principal's threads, newest first: what `GET {mount}/threads` answers.

        `{"threads": [{"threadId", "title", "updatedAt", "interrupts"}], "next"}`: each thread's title, the time
        it was last saved (ISO 8601, UTC) and its open interrupts (to draw a waiting approval again); `next` is
        the `before` of the following page, None at the end. An anonymous caller lists the unowned threads.

        Raises:
            ValueError: `limit` is not from 1 to 100.
            AdapterError: INVALID_PAGE for a `before` that no listing returned.
        """
        return await _threads.list_threads(self.config, principal, before=before, limit=limit)

    async def rename_thread(self, thread_id: str, title: str | None, *, principal: str | None = None) -> bool:
        """Set the thread's title (None clears it): `PATCH {mount}/threads/{threadId}`. False as `thread` is None.

        Raises:
            LimitExceeded: 422 `INVALID_ID`, or `INVALID_TITLE` for a title that is blank, over 200 characters,
                or holds a control character.
            Forbidden: `principal` may read the thread but not "run" on it.
        """
        return await _threads.rename_thread(self.config, thread_id, title, principal)

    async def delete_thread(self, thread_id: str, *, principal: str | None = None) -> bool:
        """Delete the thread with its messages, open turn and runs' journals: `DELETE {mount}/threads/{threadId}`.

        An interrupt open on it can never be answered afterwards. False as `thread` is None.

        Raises:
            LimitExceeded: 422 `INVALID_ID`.
            Forbidden: `principal` may read the thread but not "run" on it.
        """
        return await _threads.delete_thread(self.config, self.journals, thread_id, principal)

    async def run_events(
        self, thread_id: str, run_id: str, *, after: int = 0, principal: str | None = None
    ) -> AsyncIterator[JournalEvent] | None:
        """A run's events after seq `after`, then live until its terminal event: `GET .../runs/{runId}/events`.

        Each `JournalEvent` has its `seq` (the SSE `id:`) and its wire JSON. A run whose server died is ended
        with a `RUN_ERROR` `RUN_INTERRUPTED` of seq 0 (not in the journal), as the crash-takeover rules say.
        None for an unknown thread or run, and for a thread `principal` may not read.
        """
        listener = await self.listen(thread_id, run_id, after=after, principal=principal)
        return None if listener is None else _reattach.journal_events(listener)

    async def listen(
        self, thread_id: str, run_id: str, *, after: int = 0, principal: str | None = None
    ) -> EventReader | None:
        """The reader `run_events` and the events route read (`_sessions._journal.Listener`); None as `run_events`."""
        return await _reattach.open_events(self.config, self.journals, self.feeds, thread_id, run_id, principal, after)

    async def stop_run(self, thread_id: str, run_id: str, *, principal: str | None = None) -> bool | None:
        """Ask a run to stop, on whichever replica runs it: `POST .../runs/{runId}/stop`.

        The run ends with `RUN_FINISHED` and the outcome `{"type": "cancelled"}` at its next safe point (see
        docs/thread-api.md). True once asked; False when it had already ended; None for an unknown thread or
        run, or a thread `principal` may not read.

        Raises:
            Forbidden: `principal` may read the thread but not "run" on it.
        """
        return await _reattach.stop_run(self.config, self.journals, thread_id, run_id, principal)

    def tool_schemas(self) -> Mapping[str, Mapping[str, Any]]:
        """Each server tool's parameter schema, by name: what `editedArgs` must fit."""
        return self.config.tool_schemas()

    def now(self) -> datetime:
        """The current time, from the configured clock."""
        return self.config.now()

    @property
    def draining(self) -> bool:
        """Whether `drain` began: the adapter starts no run, and `GET /health` answers 503 "draining"."""
        return self._drained is not None

    async def drain(self, grace: timedelta | None = None) -> None:
        """Stop gracefully: start no run, let the runs in progress end within `grace`, then end the rest.

        At once, every new run (and resume) is refused with 503 `DRAINING` and `GET /health` says "draining", so
        a balancer sends them to another replica. The runs this adapter drives go on for up to `grace` (default
        `limits.drain_grace`). Then the rest are asked to stop, as a stop request asks (`_run._stop`), and after a
        few seconds cut: a cut run's journal ends with `RUN_ERROR` `RUN_INTERRUPTED`, and a resume cut while it
        applies its answers lapses its claim, so that the same answers take the turn over on another replica at
        once, under the rules of a claim whose lease ran out (docs/replicas.md). Idempotent: a second call waits
        for the first.
        """
        if self._drained is not None:
            await asyncio.shield(self._drained)
            return
        self._drained = asyncio.get_running_loop().create_future()
        grace = self.limits.drain_grace if grace is None else grace
        running = self.journals.running
        if grace > timedelta(0) or running:  # a close with nothing to wait for says nothing
            log.info(
                "draining: new runs are refused (503 DRAINING); waiting up to %g s for %d run%s in progress",
                grace.total_seconds(),
                running,
                "" if running == 1 else "s",
            )
        try:
            await self._wind_down(grace)
        finally:
            self._drained.set_result(None)

    async def _wind_down(self, grace: timedelta) -> None:
        journals, background = self.journals, self.config.background
        if grace > timedelta(0) and await journals.wait_over(grace.total_seconds()):
            await background.wait(_UNWIND_SECONDS)
            return
        await journals.stop_all()
        if await journals.wait_over(_STOP_SECONDS) and await background.wait(_UNWIND_SECONDS):
            return
        cut = journals.cut_all()
        log.warning("closing: cut %d runs and resumes that did not end when asked to stop", cut)
        if not await background.wait(_UNWIND_SECONDS):
            log.error("closing: work still running after %s s; it is left to the event loop", _UNWIND_SECONDS)

    async def aclose(self) -> None:
        """Stop the runs in progress (`drain` with no grace, unless it ran), then close the backend and the store.

        A run in progress ends as a stop request ends it (cancelled, at its next safe point), so that what it did
        is stored; one that does not within a few seconds is cut, as `drain` cuts it. A backend's `aclose`
        releases only what it owns: an injected `httpx.AsyncClient` stays open.
        """
        await self.drain(timedelta(0))
        feeds: _feed.Feeds | None = vars(self).get("feeds")  # made only once a reader reattached
        if feeds is not None:
            await feeds.aclose()
        close_backend = getattr(self.config.backend, "aclose", None)
        if close_backend is not None:
            await close_backend()
        await self.config.store.close()


_STOP_SECONDS: Final = 5.0
"""Seconds the runs asked to stop have to end at a safe point before they are cut."""
_UNWIND_SECONDS: Final = 15.0
"""Seconds the runs' drivers and journal writes have to finish (a store deadline or two) before they are left."""


@functools.cache  # the installed version does not change while the process runs; each lookup scans sys.path
def _version() -> str | None:
    """This package's version, as installed; None when it runs from a checkout that was never installed."""
    try:
        return metadata.version("agui-adapter")
    except metadata.PackageNotFoundError:
        return None
