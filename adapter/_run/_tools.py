"""Tools: typed Python functions the server runs, and schema-only tools it never runs.

A tool is *external* when its result has to come from outside the server: every client tool from
`RunAgentInput.tools`, and any function declared `@tool(external=True)`. A call to an external tool
short-circuits to a suspension before any validation or execution.

`Toolset` is the tools one run may use: the server's, plus the schema-only tools the client declared,
bounded by `ClientToolLimits` and checked once per content (`SchemaCache`, a digest of each schema's JSON).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import inspect
import json
import logging
import threading
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeAlias, overload

from ag_ui.core import AudioPart, ContentPart, DocumentPart, ImagePart, TextPart, Tool, VideoPart
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json

import schema_tools  # its schemas from signatures, by attribute: imported by the first tool made from a function
from adapter import _errors as codes
from adapter._errors import ConfigurationError, InvalidClientTool, LimitExceeded, ToolNameConflict
from adapter._state._shared import ToolState
from adapter._types import JSON
from adapter._wire import model_json
from schema_tools import (
    DEFAULT_POLICY,
    STRICT_TOOL_POLICY,
    PolicyViolation,
    SchemaIssue,
    SchemaPolicy,
    SchemaPolicyError,
    SchemaValidationError,
)

log = logging.getLogger("adapter.tools")

FrontendOutcome: TypeAlias = Literal["interrupt", "pending"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a running tool knows about its call. Declare a parameter annotated `ToolContext` to get it."""

    thread_id: str
    run_id: str
    tool_call_id: str
    idempotency_key: str
    """Stable for every execution of one logical call, replays included."""
    answer: JSON = None
    """What a person answered, when the tool is replayed after raising `InputRequired`."""
    answered: bool = False
    """True on the replay that follows an answered `InputRequired`."""
    shared_state: ToolState = field(default_factory=lambda: ToolState(None), repr=False)
    """This call's view of the run's shared state; read it through `state`, change it with the methods below."""
    principal: str | None = None
    """Who made the request that runs the tool (the approver, for an approved tool); None without auth."""

    @property
    def submitted_form_data(self) -> JSON:
        """The form data a person submitted after the tool raised `FormRequired`; None before that."""
        return self.answer if self.answered else None

    @property
    def state(self) -> JSON:
        """The run's shared state as this call sees it, its own changes included; a copy."""
        return self.shared_state.value

    def patch_state(self, operations: Sequence[Mapping[str, Any]]) -> None:
        """Change the shared state with an RFC 6902 JSON Patch, all or nothing.

        The change is streamed as a `STATE_DELTA` and kept only if the tool returns without error.

        Raises:
            ValueError: The patch does not apply to the state, or could not be sent or kept: an invalid
                pointer (RFC 6901: `~` only as `~0` or `~1`), a string with no UTF-8 form, a state nested
                more than 99 levels. `ctx.state` is unchanged.
        """
        self.shared_state.patch(operations)

    def set_state(self, value: JSON) -> None:
        """Replace the whole shared state; streamed as a `STATE_SNAPSHOT`, kept only if the tool succeeds.

        Raises:
            TypeError: `value` is not JSON.
            ValueError: It could not be sent or kept (as `patch_state`); `ctx.state` is unchanged.
        """
        self.shared_state.replace(value)


ApprovalRule: TypeAlias = Callable[[ToolContext, dict[str, Any]], bool | Awaitable[bool]]
"""`requires_approval` as a rule: asked for each call, with its validated arguments, whether a person approves it."""


class InputRequired(Exception):
    """Raised by a running backend tool, before any side effect, to wait for a person's answer.

    The run ends with an `input_required` interrupt. When the answer arrives, the tool runs again from
    the start with the answer in `ToolContext.answer`.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        response_schema: Mapping[str, Any] | None = None,
        reason: str = "input_required",
    ) -> None:
        super().__init__(message or reason)
        self.message = message
        self.response_schema = dict(response_schema) if response_schema is not None else {"type": "string"}
        self.reason = reason


class ToolError(Exception):
    """Raised by a tool to tell the model what went wrong; the message is shown to the model as is."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool call produced, as the content of the ToolMessage that answers it."""

    content: str | list[ContentPart]
    error: str | None = None

    def with_error(self, error: str) -> ToolResult:
        """The same content, marked as an error."""
        return ToolResult(self.content, error)

    @classmethod
    def of(cls, value: Any) -> ToolResult:
        """Serialise a tool's return value into message content.

        Content parts (`ag_ui.core` `TextPart`, `ImagePart`, `AudioPart`, `VideoPart`, `DocumentPart`), one or
        a list of them, stay parts: the result carries media as media. Anything else becomes JSON text.
        """
        if isinstance(value, str):
            return cls(value)
        if isinstance(value, _PARTS):
            return cls([value])
        if isinstance(value, list | tuple) and value and all(isinstance(part, _PARTS) for part in value):
            return cls(list(value))
        return cls(json.dumps(value, ensure_ascii=False, default=_json_default))


_PARTS: Final = (TextPart, ImagePart, AudioPart, VideoPart, DocumentPart)


def issues_text(issues: Iterable[SchemaIssue]) -> str:
    """Schema issues as one line of text, each as `pointer: message`."""
    return "; ".join(f"{issue.pointer or '/'}: {issue.message}" for issue in issues)


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


@dataclass(frozen=True, slots=True)
class BaseTool:
    """What every tool shares: the name, description and parameter schema the model sees."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    external: bool = False
    requires_approval: bool | ApprovalRule = False
    """True asks a person for every call; a rule (`ApprovalRule`) decides for each call (`asks`)."""
    grantable: bool = True
    """A person who approves a call may allow the tool for the rest of the thread (`"remember": "thread"`)."""
    outcome: FrontendOutcome | None = None
    """For external tools: how a call ends the run. None means the adapter's default."""
    cancellable: bool = False
    """A stop request cancels the tool while it runs (`asyncio.CancelledError` where it waits), instead of
    letting it finish (`adapter._run._stop`)."""

    def spec(self) -> Tool:
        """The tool as the model sees it."""
        return Tool(name=self.name, description=self.description, parameters=dict(self.parameters))

    @property
    def gated(self) -> bool:
        """Some call of this tool may wait for a person's approval: it asks always, or by a rule."""
        return self.requires_approval is not False

    async def asks(self, context: ToolContext, arguments: dict[str, Any]) -> bool:
        """Whether this call waits for a person's approval, `arguments` validated against the tool's schema.

        A rule that raises, or answers anything but a bool, asks: an approval is never skipped by a bug.
        """
        rule = self.requires_approval
        if not callable(rule):
            return rule
        try:
            said = rule(context, arguments)
            if inspect.isawaitable(said):
                said = await said
        except Exception:
            log.exception("the approval rule of %s raised; the call waits for a person", self.name)
            return True
        if not isinstance(said, bool):
            log.error("the approval rule of %s answered %s, not a bool; the call waits", self.name, type(said).__name__)
            return True
        return said


@dataclass(frozen=True, slots=True)
class ClientTool(BaseTool):
    """A tool the client declared in `RunAgentInput.tools`: schema only, answered by the client."""

    result_schema: Mapping[str, Any] = field(default_factory=dict)
    """What the client's answer must look like; empty accepts any JSON value."""

    @classmethod
    def from_wire(cls, declared: Tool) -> ClientTool:
        """Wrap a client's tool declaration as an external, schema-only tool."""
        metadata = declared.metadata or {}
        parameters = declared.parameters if isinstance(declared.parameters, dict) else {"type": "object"}
        result_schema = metadata.get("resultSchema") if isinstance(metadata, dict) else None
        return cls(
            name=declared.name,
            description=declared.description,
            # `$schema` dropped: clients generate draft-07 schemas, and the model reads the shape, not the dialect.
            parameters={k: v for k, v in parameters.items() if k != "$schema"},
            external=True,
            result_schema=result_schema if isinstance(result_schema, dict) else {},
        )


@dataclass(frozen=True, slots=True)
class FunctionTool(BaseTool):
    """A typed Python function the server runs (unless it is declared external)."""

    signature: schema_tools.CallableSignature | None = None
    fn: Callable[..., Any] | None = None

    async def invoke(
        self,
        arguments: Mapping[str, Any],
        context: ToolContext,
        held: Callable[[], ToolResult | None] | None = None,
        *,
        checked: bool = False,
    ) -> ToolResult:
        """Validate `arguments`, call the function and turn what it returns or raises into a result.

        `InputRequired` propagates: it is a signal for the runner, not a failure. `held()`, asked right before
        the function is called, may give the result instead (a stopped run's: the function is never called).
        `checked` says that `arguments` were already validated against this tool's `parameters` (an approval's
        `editedArgs`, by the resume gate against `EngineConfig.tool_schemas()`): the schema is not applied again.
        An empty schema accepts everything, and is not applied either.
        """
        assert self.signature is not None and self.fn is not None, "external tools are never invoked"
        if self.parameters and not checked:
            issues = await avalidate(dict(arguments), dict(self.parameters))
            if issues:
                text = issues_text(issues)
                return ToolResult(f"Invalid arguments for {self.name}: {text}", error="invalid_arguments")
        try:
            kwargs = self.signature.bind(dict(arguments))
        except SchemaValidationError as exc:
            return ToolResult(f"Invalid arguments for {self.name}: {exc}", error="invalid_arguments")
        kwargs.update({name: context for name in self.signature.injected})
        instead = held() if held is not None else None
        if instead is not None:
            return instead
        try:
            return ToolResult.of(await self._call(kwargs))
        except InputRequired:
            raise
        except ToolError as exc:
            return ToolResult(f"{self.name} failed: {exc}", error="tool_error")
        except Exception as exc:
            # The model learns that the tool failed, never the internals: messages can hold secrets.
            log.exception("tool %s raised", self.name)
            return ToolResult(f"{self.name} failed with an internal error ({type(exc).__name__}).", error="tool_error")

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        assert self.fn is not None and self.signature is not None
        if self.signature.is_async:
            return await self.fn(**kwargs)
        # A sync tool may block: keep it off the event loop.
        return await asyncio.to_thread(functools.partial(self.fn, **kwargs))


AnyFunction: TypeAlias = Callable[..., Any] | Callable[..., Awaitable[Any]]


@overload
def tool(fn: AnyFunction, /) -> FunctionTool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | ApprovalRule = False,
    external: bool = False,
    outcome: FrontendOutcome | None = None,
    cancellable: bool = False,
    grantable: bool = True,
) -> Callable[[AnyFunction], FunctionTool]: ...


def tool(
    fn: AnyFunction | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool | ApprovalRule = False,
    external: bool = False,
    outcome: FrontendOutcome | None = None,
    cancellable: bool = False,
    grantable: bool = True,
) -> FunctionTool | Callable[[AnyFunction], FunctionTool]:
    """Turn a typed function into a backend tool; its parameter schema comes from its signature.

    Args:
        fn: The function, when used as a bare `@tool`.
        name: The name the model sees; the function's name by default.
        description: What the model reads; the docstring by default.
        requires_approval: True suspends every call for a person's approval before it runs. A rule
            `(ctx: ToolContext, arguments: dict) -> bool` (or an async one) is asked for each call, with its
            arguments validated against the tool's schema: True asks a person (unless a grant covers the tool),
            False runs the call at once. A rule that raises asks, and the error is logged. A call whose
            arguments are invalid is not asked about: it runs to its `invalid_arguments` result, calling nothing.
        external: Never run the function: a call suspends and its result comes from outside.
        outcome: For external tools, how a call ends the run ("interrupt" or "pending").
        cancellable: A stop request (`Adapter.stop_run`) cancels the tool while it runs: `asyncio.CancelledError`
            is raised where it waits, and its call is answered as cancelled. Without it a tool that started
            finishes, and its result is kept. Only an async function can be cancelled (a sync one runs on a
            worker thread, which nothing can stop): `cancellable=True` on one is a `ConfigurationError`.
        grantable: False refuses `"remember": "thread"` on its approvals (payments, deletions): every call that
            asks is approved by a person, and no grant ever lets one through.
    """
    if not isinstance(requires_approval, bool) and not callable(requires_approval):
        shown = type(requires_approval).__name__
        raise ConfigurationError(f"requires_approval is True, False or a rule (ctx, arguments) -> bool, not {shown}")
    if requires_approval is not False and external:
        raise ConfigurationError("a tool is either external or runs after approval, not both")

    def wrap(function: AnyFunction) -> FunctionTool:
        signature = schema_tools.CallableSignature.from_callable(function, injected=(ToolContext,))
        if cancellable and not signature.is_async:
            raise ConfigurationError(f"the tool {name or signature.name!r} is cancellable, so it must be async")
        _warn_if_vague(function, name or signature.name, description or signature.description, fn is not None)
        return FunctionTool(
            name=name or signature.name,
            description=description or signature.description or signature.name,
            parameters=signature.schema,
            external=external,
            requires_approval=requires_approval,
            grantable=grantable,
            outcome=outcome,
            cancellable=cancellable,
            signature=signature,
            fn=function,
        )

    return wrap(fn) if fn is not None else wrap


def _warn_if_vague(function: AnyFunction, name: str, description: str | None, bare: bool) -> None:
    """Warn, at the decorator, about what leaves the model guessing: no description, or a parameter with no type.

    `Any` is a type someone chose; a missing annotation is one someone forgot.
    """
    where = 4 if bare else 3  # the line with the decorator: through `wrap`, and `tool` when used bare
    if not description:
        message = f"the tool {name!r} has no docstring or description: the model sees only its name"
        warnings.warn(message, UserWarning, stacklevel=where)
    parameters = inspect.signature(function).parameters.values()
    untyped = [p.name for p in parameters if p.annotation is inspect.Parameter.empty]
    if untyped:
        listed = ", ".join(repr(param) for param in untyped)
        message = f"the tool {name!r} has parameters without a type annotation ({listed}): the model may send any value"
        warnings.warn(message, UserWarning, stacklevel=where)


_INLINE_BYTES: Final = 64 * 1024  # larger declarations are checked off the event loop, as large bodies are parsed


DEFAULT_ENTRIES: Final = 4096
"""Schemas remembered per adapter: a digest and (rarely) a few violations each."""
DEFAULT_BYTES: Final = 4 * 1024 * 1024
"""What the remembered checks may hold in all, as `_cost` counts them: a thousand violations are not a digest."""
_ENTRY_BYTES: Final = 256  # a key (policy, 32-byte digest), its tuple and its place in the map
_VIOLATION_BYTES: Final = 128  # a PolicyViolation besides the text of its pointer, rule and message

_Key = tuple[SchemaPolicy, bytes]


def _cost(found: tuple[PolicyViolation, ...]) -> int:
    return _ENTRY_BYTES + sum(_VIOLATION_BYTES + len(v.pointer) + len(v.rule) + len(v.message) for v in found)


class SchemaCache:
    """`check_schema` results by (policy, schema digest); the least recently used go first, past either bound."""

    def __init__(self, entries: int = DEFAULT_ENTRIES, max_bytes: int = DEFAULT_BYTES) -> None:
        self._entries = entries
        self._max_bytes = max_bytes
        self._found: OrderedDict[_Key, tuple[PolicyViolation, ...]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._found)

    @property
    def bytes(self) -> int:
        """What the remembered checks hold, as `_cost` counts them."""
        return self._bytes

    def violations(self, schema: object, policy: SchemaPolicy) -> tuple[PolicyViolation, ...]:
        """What `check_schema(schema, policy=policy)` finds: remembered, or checked now and remembered."""
        try:
            key = (policy, hashlib.sha256(to_json(schema)).digest())
        except PydanticSerializationError:  # not JSON: the check itself says so, and there is nothing to key
            return _check(schema, policy)
        with self._lock:
            found = self._found.get(key)
            if found is not None:
                self._found.move_to_end(key)
                return found
        found = _check(schema, policy)
        self._keep(key, found)
        return found

    def _keep(self, key: _Key, found: tuple[PolicyViolation, ...]) -> None:
        cost = _cost(found)
        if cost > self._max_bytes:
            return
        with self._lock:
            previous = self._found.pop(key, None)
            self._bytes += cost - (_cost(previous) if previous is not None else 0)
            self._found[key] = found
            while self._bytes > self._max_bytes or len(self._found) > self._entries:
                self._bytes -= _cost(self._found.popitem(last=False)[1])


def check_schema(schema: object, *, policy: SchemaPolicy = DEFAULT_POLICY) -> None:
    """`schema_tools.check_schema`, imported on the first check.

    So `jsonschema` and `re2` stay out of a process that never checks a schema (issue 43's memory).
    """
    from schema_tools import check_schema as check

    check(schema, policy=policy)


async def avalidate(instance: Any, schema: Mapping[str, Any]) -> list[SchemaIssue]:
    """`schema_tools.avalidate`, imported on the first validation, as `check_schema` is."""
    from schema_tools import avalidate as validate

    return await validate(instance, schema)


def _check(schema: object, policy: SchemaPolicy) -> tuple[PolicyViolation, ...]:
    try:
        check_schema(schema, policy=policy)
    except SchemaPolicyError as exc:
        return tuple(exc.violations)
    return ()


@dataclass(frozen=True, slots=True)
class ClientToolLimits:
    """How many tools a client may declare in one input, how large they may be in all, and the checks made."""

    max_tools: int = 128
    max_bytes: int = 256 * 1024
    cache: SchemaCache = field(default_factory=SchemaCache)

    def measure(self, client_tools: Sequence[Tool]) -> int:
        """The declarations' size as JSON, in bytes, once they are known to be within the limits.

        Raises:
            LimitExceeded: 413 `TOO_MANY_TOOLS` or `TOOLS_TOO_LARGE`.
        """
        if len(client_tools) > self.max_tools:
            message = f"The input declares {len(client_tools)} tools; at most {self.max_tools} are accepted."
            raise LimitExceeded(message, code=codes.TOO_MANY_TOOLS)
        size = 0
        for declared in client_tools:  # serialised from the SDK's field plan: a megabyte takes milliseconds
            size += len(model_json(declared))
            if size > self.max_bytes:
                message = f"The input's tool declarations exceed {self.max_bytes} bytes of JSON."
                raise LimitExceeded(message, code=codes.TOOLS_TOO_LARGE)
        return size


async def client_toolset(
    server_tools: Sequence[BaseTool],
    client_tools: Sequence[Tool],
    *,
    client_policy: SchemaPolicy | None,
    limits: ClientToolLimits,
) -> Toolset:
    """The run's `Toolset`, built (and its client schemas checked) on a worker thread when the declarations are large.

    Raises:
        LimitExceeded: Over `limits`, before anything is checked.
        ToolNameConflict: 422, a client tool named like a server tool or another client tool.
        InvalidClientTool: 422, a client schema the policy does not accept.
    """
    build = functools.partial(Toolset, server_tools, client_tools, client_policy=client_policy, cache=limits.cache)
    if limits.measure(client_tools) <= _INLINE_BYTES:
        return build()
    return await asyncio.to_thread(build)


class Toolset:
    """The tools one run may use: the server's, plus the client's schema-only ones."""

    def __init__(
        self,
        server_tools: Iterable[BaseTool],
        client_tools: Sequence[Tool] = (),
        *,
        client_policy: SchemaPolicy | None = STRICT_TOOL_POLICY,
        cache: SchemaCache | None = None,
    ) -> None:
        checked = cache if cache is not None else SchemaCache()
        self._tools: dict[str, BaseTool] = {}
        for server_tool in server_tools:
            self._tools[server_tool.name] = server_tool
        names = [declared.name for declared in client_tools]
        clashes = sorted({name for name in names if name in self._tools or names.count(name) > 1})
        if clashes:
            raise ToolNameConflict(clashes)
        for index, declared in enumerate(client_tools):
            wrapped = ClientTool.from_wire(declared)
            if client_policy is not None:
                _check_client_schemas(index, declared, wrapped, client_policy, checked)
            self._tools[declared.name] = wrapped

    def get(self, name: str) -> BaseTool | None:
        """The tool called `name`, if this run has one."""
        return self._tools.get(name)

    def specs(self) -> list[Tool]:
        """Every tool as the model sees it."""
        return [each.spec() for each in self._tools.values()]


def _check_client_schemas(
    index: int, declared: Tool, tool: ClientTool, policy: SchemaPolicy, cache: SchemaCache
) -> None:
    """Refuse a client tool whose parameter or result schema is unsafe to hand a model, a page or a validator.

    Each detail names the schema's place in the input (`schema`, e.g. `/tools/0/metadata/resultSchema`)
    and the violation's JSON pointer inside it (`pointer`).
    """
    metadata = declared.metadata if isinstance(declared.metadata, dict) else {}
    schemas: list[tuple[str, object, SchemaPolicy]] = [(f"/tools/{index}/parameters", dict(tool.parameters), policy)]
    result_schema = metadata.get("resultSchema")
    if result_schema is not None and not isinstance(result_schema, bool):  # true/false are schemas too
        results_policy = replace(policy, require_object_root=False)  # a result may be any JSON value
        schemas.append((f"/tools/{index}/metadata/resultSchema", result_schema, results_policy))
    for where, schema, rules in schemas:
        violations = cache.violations(schema, rules)
        if violations:
            details = [
                {"schema": where, "pointer": v.pointer, "rule": v.rule, "message": v.message} for v in violations
            ]
            message = f"the client tool {tool.name!r} has an unacceptable schema at {where}"
            raise InvalidClientTool(message, details=details)


def _not_a_tool(index: int, given: object) -> str:
    if isinstance(given, Mapping):
        return (
            f"tools[{index}] is a dict, as OpenAI declares tools; a server tool is a function decorated with"
            " @tool (from adapter import tool), and a tool the page runs comes from the client in RunAgentInput.tools"
        )
    if callable(given):
        shown = getattr(given, "__name__", type(given).__name__)
        return f"tools[{index}] ({shown}) is a plain function: decorate it with @tool (from adapter import tool)"
    return f"tools[{index}] is a {type(given).__name__}, not a tool: pass functions decorated with @tool"


def check_unique(tools: Iterable[BaseTool]) -> list[BaseTool]:
    """Return `tools` as a list, refusing anything that is not a tool, and two tools with one name, at start-up."""
    seen: dict[str, BaseTool] = {}
    for index, each in enumerate(tools):
        if not isinstance(each, BaseTool):
            raise ConfigurationError(_not_a_tool(index, each))
        if each.name in seen:
            raise ConfigurationError(f"two tools are named {each.name!r}")
        seen[each.name] = each
    return list(seen.values())
