"""The engine's configuration: built once by `Adapter`, its options checked then, read by every run, never changed."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any, Final, Literal, ParamSpec, TypeVar, get_args

from adapter._errors import ConfigurationError
from adapter._jsonpatch import MAX_PATCHED_BYTES
from adapter._run._access import Access
from adapter._run._events import Listener
from adapter._run._interrupts import InterruptPolicy
from adapter._run._tools import BaseTool, ClientToolLimits
from adapter._state._predict import PredictState
from adapter._thread._cache import ParsedStore, ParsedThreads
from adapter._thread._conversation import HistoryView, declared_tail
from adapter.backends._seam import Backend
from adapter.stores import TurnStore
from schema_tools import SchemaPolicy

_OUTCOMES = ("interrupt", "pending")
P = ParamSpec("P")
R = TypeVar("R")

HistoryMode = Literal["client", "server"]
"""Who keeps a thread's conversation: the client, resending it with every input, or the server's store."""

OnDisconnect = Literal["continue", "stop"]
"""What a run does when the client that started it leaves: go on (and be reattached to), or stop."""

UnknownResumeEntries = Literal["refuse", "warn"]
"""What a resume entry naming no interrupt of the thread gets: refused, or left out with a warning (AG-UI 1.1)."""

DEFAULT_MAX_EVENTS: Final = 100_000
"""Events one run's journal keeps at most (its terminal event aside)."""
DEFAULT_MAX_CHARS: Final = 32 * 1024 * 1024
"""Characters of wire JSON one run's journal keeps at most (its terminal event aside)."""
DEFAULT_MAX_RUN_TIME: Final = 3600.0
"""Seconds a run may go on before it is stopped (`RUN_DEADLINE`): runs outlive their client, not forever."""
DEFAULT_MAX_DETACHED: Final = 16
"""Runs one principal may leave going without a reader on one replica (`TOO_MANY_DETACHED_RUNS` past it)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Every bound an adapter keeps, in one place: how much one input, run or journal may take, and for how long.

    `Adapter(limits=Limits(max_steps=20))`; the fields not given keep their defaults. Each is checked when the
    `Limits` is built (`ConfigurationError`). docs/options.md lists them; docs/security.md says what each defends.

    Attributes:
        max_body_bytes: Largest run body the HTTP edge reads (1 MiB); larger ones get 413 `CONTENT_TOO_LARGE`
            without being read whole.
        max_steps: Model steps one run may take before it stops as cancelled (10).
        max_tool_calls: Tool calls one turn may make; a call past it gets an error result (50; None: no bound).
            A call that suspended and ran again after its answer counts once.
        max_client_tools: Tools one input may declare; more get 413 `TOO_MANY_TOOLS` before any event (128).
        max_client_tool_bytes: Size of an input's tool declarations together, as JSON; more get 413
            `TOOLS_TOO_LARGE` (256 KiB). Large declarations are checked on a worker thread, and each schema's
            check is remembered by content, so a client that resends its tools pays for the check once.
        max_state_bytes: The most one state change may build, whoever makes it (a backend's `STATE_DELTA`, a
            tool's `patch_state`): the state plus every value the patch adds or copies, about as JSON bytes, each
            value counting at least 16 (8 MiB). Past it a backend's delta ends the run with
            `STATE_PATCH_TOO_LARGE`, and a tool's `patch_state` raises `ValueError`.
        max_journal_events: Events one run's journal keeps (100,000); a run past it is stopped and ends with
            `RUN_ERROR` `JOURNAL_LIMIT`.
        max_journal_chars: Characters of wire JSON one run's journal keeps (32 Mi); past it, as
            `max_journal_events`.
        max_detached_runs: Runs one principal may leave going on one replica without a reader (16), a run whose
            events `Adapter.start` returned and no one read yet among them; their next run is refused with 429
            `TOO_MANY_DETACHED_RUNS` until one ends or is read again.
        max_run_time: How long one run may go on (an hour; None: no bound): a run outlives its client, so past
            it the run is asked to stop, as `stop_run` asks, and ends with `RUN_ERROR` `RUN_DEADLINE` at its
            next safe point, what it did stored.
        interrupt_ttl: How long an interrupt stays answerable (None, the default: forever).
        claim_lease: How long a resume may hold a turn before another may claim it: a crashed replica's (5 min).
        drain_grace: How long `drain` (a graceful stop: SIGTERM with `examples/serving.py`) lets the runs in
            progress end on their own before it stops them and lapses the claims they hold (30 s).
    """

    max_body_bytes: int = 1_048_576
    max_steps: int = 10
    max_tool_calls: int | None = 50
    max_client_tools: int = 128
    max_client_tool_bytes: int = 256 * 1024
    max_state_bytes: int = MAX_PATCHED_BYTES
    max_journal_events: int = DEFAULT_MAX_EVENTS
    max_journal_chars: int = DEFAULT_MAX_CHARS
    max_detached_runs: int = DEFAULT_MAX_DETACHED
    max_run_time: timedelta | None = timedelta(seconds=DEFAULT_MAX_RUN_TIME)
    interrupt_ttl: timedelta | None = None
    claim_lease: timedelta = timedelta(minutes=5)
    drain_grace: timedelta = timedelta(seconds=30)

    def __post_init__(self) -> None:
        counts = {
            "max_body_bytes": self.max_body_bytes,
            "max_steps": self.max_steps,
            "max_state_bytes": self.max_state_bytes,
            "max_journal_events": self.max_journal_events,
            "max_journal_chars": self.max_journal_chars,
            "max_detached_runs": self.max_detached_runs,
        }
        for name, value in counts.items():
            if not _whole(value) or value < 1:
                raise ConfigurationError(f"Limits({name}=) must be a positive whole number, not {value!r}")
        for name, value in {
            "max_client_tools": self.max_client_tools,
            "max_client_tool_bytes": self.max_client_tool_bytes,
        }.items():
            if not _whole(value) or value < 0:
                raise ConfigurationError(f"Limits({name}=) must be a whole number, not negative: {value!r}")
        if self.max_tool_calls is not None and (not _whole(self.max_tool_calls) or self.max_tool_calls < 0):
            raise ConfigurationError(
                f"Limits(max_tool_calls=) must be a whole number or None, not {self.max_tool_calls!r}"
            )
        if self.max_run_time is not None and not self.max_run_time > timedelta(0):
            raise ConfigurationError("Limits(max_run_time=) must be positive, or None for no bound")
        if not self.drain_grace >= timedelta(0):
            raise ConfigurationError(f"Limits(drain_grace=) must not be negative, not {self.drain_grace}")

    def client_tools(self) -> ClientToolLimits:
        """The bounds of one input's client tools (`adapter._run._tools`)."""
        return ClientToolLimits(self.max_client_tools, self.max_client_tool_bytes)


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


MOVED_TO_LIMITS: Final = frozenset(field.name for field in fields(Limits))
"""The keywords `Adapter` and `create_app` once took one by one, now fields of `Limits`."""


def refuses_moved_options(init: Callable[P, R]) -> Callable[P, R]:
    """Wrap `Adapter.__init__` or `create_app`: an option that moved gets its new spelling, not a bare TypeError.

    The wrapped signature is the same (`inspect.signature` and the type checkers read it); only the error differs.
    """

    @functools.wraps(init)
    def checked(*args: P.args, **options: P.kwargs) -> R:
        refuse_moved(options)
        return init(*args, **options)

    return checked


def refuse_moved(options: Iterable[str]) -> None:
    """Name the new spelling of a keyword `Adapter` or `create_app` once took.

    Raises:
        TypeError: `options` holds a keyword that moved into `Limits`, or `clock`.
    """
    given = set(options)
    moved = sorted(given & MOVED_TO_LIMITS)
    if moved:
        spelled = ", ".join(f"{name}=..." for name in moved)
        raise TypeError(
            f"{', '.join(moved)} moved into Limits: pass limits=Limits({spelled}) (from adapter import Limits)"
        )
    if "clock" in given:
        raise TypeError("clock is no longer an option: it was for tests, which call adapter.config.use_clock(clock)")


class BackgroundTasks:
    """Work that must finish even if the request that started it goes away: a run's driver and journal writer.

    A draining adapter cuts the drivers last (`Journals.cut_all`): a resume cut while it applies
    its answers lapses its claim at once (`adapter._run._runner`), so that another replica takes the turn over.
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
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    """The time source. Not an option of `Adapter`: a test moves time with `use_clock`."""
    predictions: tuple[PredictState, ...] = ()
    client_tool_limits: ClientToolLimits = field(default_factory=ClientToolLimits)
    max_state_bytes: int = MAX_PATCHED_BYTES
    history_view: HistoryView | None = None
    access: Access = field(default_factory=Access)
    background: BackgroundTasks = field(default_factory=BackgroundTasks)
    parsed: ParsedThreads = field(default_factory=ParsedThreads)
    """The threads this adapter last stored or read, as protocol messages (`adapter._thread._cache`)."""
    on_disconnect: OnDisconnect = "continue"
    unknown_resume_entries: UnknownResumeEntries = "refuse"
    """`"refuse"`: a resume entry naming no interrupt of the thread is refused (RESUME_UNKNOWN_INTERRUPT); `"warn"`:
    it is left out and the run goes on, with a warning (AG-UI 1.1)."""
    threads: ParsedStore = field(init=False)
    """The store as a run's handle reads and writes a thread: through `parsed` (`adapter._thread._cache`)."""
    _tool_schemas: Mapping[str, Mapping[str, Any]] = field(init=False, repr=False)
    _grantable: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "threads", ParsedStore(self.store, self.parsed))
        schemas = MappingProxyType({tool.name: tool.parameters for tool in self.tools})
        object.__setattr__(self, "_tool_schemas", schemas)
        grantable = frozenset(t.name for t in self.tools if t.gated and t.grantable and not t.external)
        object.__setattr__(self, "_grantable", grantable)

    def now(self) -> datetime:
        """The current time, from the configured clock."""
        return self.clock()

    def use_clock(self, clock: Callable[[], datetime]) -> None:
        """For tests: read the time from `clock` from now on, so that a test moves time instead of waiting for it.

        Call it before the adapter's first run; everything that reads the time asks `now`, which asks `clock`.
        """
        object.__setattr__(self, "clock", clock)

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
    history: str,
    history_view: HistoryView | None,
    on_disconnect: str = "continue",
    unknown_resume_entries: str = "refuse",
) -> None:
    """Refuse an option no run could use, when the adapter is built rather than at its first run.

    `Limits` checks its own fields when it is built.
    """
    for outcome in outcomes:
        if outcome not in _OUTCOMES:
            raise ConfigurationError(f"frontend outcome must be 'interrupt' or 'pending', not {outcome!r}")
    if history not in get_args(HistoryMode):
        raise ConfigurationError(f"history must be 'client' or 'server', not {history!r}")
    declared_tail(history_view)  # a bad `tail` is refused here, not on the first run
    if on_disconnect not in get_args(OnDisconnect):
        raise ConfigurationError(f"on_disconnect must be 'continue' or 'stop', not {on_disconnect!r}")
    if unknown_resume_entries not in get_args(UnknownResumeEntries):
        raise ConfigurationError(f"unknown_resume_entries must be 'refuse' or 'warn', not {unknown_resume_entries!r}")


def checked_predictions(entries: Iterable[PredictState]) -> tuple[PredictState, ...]:
    """The `predict_state` entries, refusing two that write one state key from one tool."""
    checked = tuple(entries)
    keys = [(entry.tool, entry.state_key) for entry in checked]
    clashes = sorted({key for key in keys if keys.count(key) > 1})
    if clashes:
        raise ConfigurationError(f"predict_state names a tool's state key twice: {clashes}")
    return checked
