"""The engine's configuration: built once by `Adapter`, its options checked then, read by every run, never changed."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal, get_args

from adapter._access import Access
from adapter._conversation import HistoryView, declared_tail
from adapter._errors import ConfigurationError
from adapter._events import Listener
from adapter._feed import Feeds
from adapter._interrupts import InterruptPolicy
from adapter._journal import JournalLimits, Journals
from adapter._jsonpatch import MAX_PATCHED_BYTES
from adapter._parsed import ParsedThreads
from adapter._predict import PredictState
from adapter._tools import BaseTool, ClientToolLimits
from adapter.backends._seam import Backend
from adapter.stores import TurnStore
from schema_tools import SchemaPolicy

_OUTCOMES = ("interrupt", "pending")

HistoryMode = Literal["client", "server"]
"""Who keeps a thread's conversation: the client, resending it with every input, or the server's store."""

OnDisconnect = Literal["continue", "stop"]
"""What a run does when the client that started it leaves: go on (and be reattached to), or stop."""

UnknownResumeEntries = Literal["refuse", "warn"]
"""What a resume entry naming no interrupt of the thread gets: refused, or left out with a warning (AG-UI 1.1)."""


class BackgroundTasks:
    """Work that must finish even if the request that started it goes away: a run's driver and journal writer.

    A draining adapter cuts the drivers last (`adapter._journal.Journals.cut_all`): a resume cut while it applies
    its answers lapses its claim at once (`adapter._runner`), so that another replica takes the turn over.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def keep(self, task: asyncio.Future[Any]) -> None:
        """Hold a reference to `task` until it is done."""
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self, timeout: float | None = None) -> bool:
        """Wait for every task held now, at most `timeout` seconds; whether all are done.

        Their failures are already reported by the tasks themselves.
        """
        if not self._tasks:
            return True
        _, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        return not pending


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """What a run reads from the adapter's options. `Adapter` documents each one."""

    backend: Backend
    tools: tuple[BaseTool, ...]
    store: TurnStore
    policy: InterruptPolicy
    max_steps: int
    max_tool_calls: int | None
    listeners: tuple[Listener, ...]
    claim_lease: timedelta
    client_tool_policy: SchemaPolicy | None
    history: HistoryMode
    clock: Callable[[], datetime]
    predictions: tuple[PredictState, ...] = ()
    client_tool_limits: ClientToolLimits = field(default_factory=ClientToolLimits)
    max_state_bytes: int = MAX_PATCHED_BYTES
    history_view: HistoryView | None = None
    access: Access = field(default_factory=Access)
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    parsed: ParsedThreads = field(default_factory=ParsedThreads)
    """The threads this adapter last stored or read, as protocol messages (`adapter._parsed`)."""
    on_disconnect: OnDisconnect = "continue"
    unknown_resume_entries: UnknownResumeEntries = "refuse"
    """`"refuse"`: a resume entry naming no interrupt of the thread is refused (RESUME_UNKNOWN_INTERRUPT); `"warn"`:
    it is left out and the run goes on, with a warning (AG-UI 1.1)."""
    journal_limits: JournalLimits = field(default_factory=JournalLimits)
    journals: Journals = field(init=False)
    """The runs this adapter drives, and their journals (`adapter._journal`)."""
    feeds: Feeds = field(init=False)
    """The journals of runs other replicas drive that this one follows for its readers (`adapter._feed`)."""
    _tool_schemas: Mapping[str, Mapping[str, Any]] = field(init=False, repr=False)
    _grantable: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        journals = Journals(
            self.store,
            limits=self.journal_limits,
            stop_on_leave=self.on_disconnect == "stop",
            keep=self.background.keep,
        )
        object.__setattr__(self, "journals", journals)
        object.__setattr__(self, "feeds", Feeds(self.store, claim_lease=self.claim_lease, clock=self.clock))
        schemas = MappingProxyType({tool.name: tool.parameters for tool in self.tools})
        object.__setattr__(self, "_tool_schemas", schemas)
        grantable = frozenset(t.name for t in self.tools if t.gated and t.grantable and not t.external)
        object.__setattr__(self, "_grantable", grantable)

    def now(self) -> datetime:
        """The current time, from the configured clock."""
        return self.clock()

    def tool_schemas(self) -> Mapping[str, Mapping[str, Any]]:
        """Each server tool's parameter schema, by name: what `editedArgs` must fit. Built once: the tools are fixed."""
        return self._tool_schemas

    def grantable(self) -> frozenset[str]:
        """The server tools a person may allow for the rest of a thread: those that ask, unless `grantable=False`."""
        return self._grantable


def check_backend(backend: object) -> None:
    """Refuse what is not a backend when the adapter is built, naming what is missing, not at every run's start.

    A backend is an object whose `stream(request)` returns an async iterator of items: an `async def` that yields,
    or a plain `def` that returns one.
    """
    shown = type(backend).__name__
    if isinstance(backend, type):
        raise ConfigurationError(f"backend is the class {backend.__name__}, not a backend: pass an instance of it")
    stream = getattr(backend, "stream", None)
    if stream is None:
        raise ConfigurationError(
            f"backend ({shown}) has no stream(request) method: a backend's stream yields one assistant step's"
            " items (adapter.backends: TextDelta, ToolCall, ...); see docs/backends.md"
        )
    if not callable(stream):
        raise ConfigurationError(f"backend ({shown}) has a stream attribute that is not a method")
    if inspect.isgeneratorfunction(stream):
        raise ConfigurationError(f"backend ({shown}).stream is a generator: write it `async def`")
    if inspect.iscoroutinefunction(stream):
        raise ConfigurationError(
            f"backend ({shown}).stream is `async def` without `yield`: yield its items instead of returning them"
        )


def check_options(
    outcomes: Iterable[str],
    max_steps: int,
    max_client_tools: int,
    max_client_tool_bytes: int,
    max_state_bytes: int,
    history: str,
    history_view: HistoryView | None,
    on_disconnect: str = "continue",
    journal_limits: JournalLimits | None = None,
    unknown_resume_entries: str = "refuse",
) -> None:
    """Refuse an option no run could use, when the adapter is built rather than at its first run."""
    for outcome in outcomes:
        if outcome not in _OUTCOMES:
            raise ConfigurationError(f"frontend outcome must be 'interrupt' or 'pending', not {outcome!r}")
    if max_steps < 1:
        raise ConfigurationError("max_steps must be at least 1")
    if max_client_tools < 0 or max_client_tool_bytes < 0:
        raise ConfigurationError("max_client_tools and max_client_tool_bytes must not be negative")
    if isinstance(max_state_bytes, bool) or not isinstance(max_state_bytes, int) or max_state_bytes < 1:
        raise ConfigurationError("max_state_bytes must be a positive number of bytes")
    if history not in get_args(HistoryMode):
        raise ConfigurationError(f"history must be 'client' or 'server', not {history!r}")
    declared_tail(history_view)  # a bad `tail` is refused here, not on the first run
    if on_disconnect not in get_args(OnDisconnect):
        raise ConfigurationError(f"on_disconnect must be 'continue' or 'stop', not {on_disconnect!r}")
    if unknown_resume_entries not in get_args(UnknownResumeEntries):
        raise ConfigurationError(f"unknown_resume_entries must be 'refuse' or 'warn', not {unknown_resume_entries!r}")
    limits = journal_limits or JournalLimits()
    counts = (
        ("max_journal_events", limits.max_events),
        ("max_journal_chars", limits.max_chars),
        ("max_detached_runs", limits.max_detached),
    )
    for name, value in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be a positive whole number")
    if limits.max_run_time is not None and not limits.max_run_time > 0:  # also refuses NaN
        raise ConfigurationError("max_run_time must be positive, or None for no bound")


def checked_predictions(entries: Iterable[PredictState]) -> tuple[PredictState, ...]:
    """The `predict_state` entries, refusing two that write one state key from one tool."""
    checked = tuple(entries)
    keys = [(entry.tool, entry.state_key) for entry in checked]
    clashes = sorted({key for key in keys if keys.count(key) > 1})
    if clashes:
        raise ConfigurationError(f"predict_state names a tool's state key twice: {clashes}")
    return checked
