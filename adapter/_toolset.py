"""The tools one run may use: the server's, plus the schema-only tools the client declared.

The client's declarations are bounded (`ClientToolLimits`) and their schemas checked once per content:
`SchemaCache` remembers each check by a digest of the schema's JSON, bounded (least recently used go).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from ag_ui.core import Tool
from pydantic_core import PydanticSerializationError, to_json

from adapter import _errors as codes
from adapter._errors import AdapterError, ConfigurationError, InvalidClientTool, LimitExceeded, ToolNameConflict
from adapter._tools import BaseTool, ClientTool
from schema_tools import STRICT_TOOL_POLICY, PolicyViolation, SchemaPolicy, SchemaPolicyError, check_schema

_INLINE_BYTES: Final = 64 * 1024  # larger declarations are checked off the event loop, as large bodies are parsed


DEFAULT_ENTRIES: Final = 4096
"""Schemas remembered per adapter: a digest and (rarely) a few violations each, well under 1 MiB in all."""

_Key = tuple[SchemaPolicy, bytes]


class SchemaCache:
    """`check_schema` results by (policy, schema digest); the least recently used entry goes first."""

    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self._entries = entries
        self._found: OrderedDict[_Key, tuple[PolicyViolation, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._found)

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
        with self._lock:
            self._found[key] = found
            while len(self._found) > self._entries:
                self._found.popitem(last=False)
        return found


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
        for declared in client_tools:  # serialised by pydantic-core: a megabyte takes milliseconds
            size += len(declared.model_dump_json(by_alias=True))
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
) -> Toolset | AdapterError:
    """The run's `Toolset`, built (and its client schemas checked) on a worker thread when the declarations are large.

    Returns:
        The toolset, or the `ToolNameConflict` / `InvalidClientTool` that the run reports as its RUN_ERROR.

    Raises:
        LimitExceeded: Over `limits`, before anything is checked: a refusal before any event.
    """
    build = functools.partial(Toolset, server_tools, client_tools, client_policy=client_policy, cache=limits.cache)
    try:
        if limits.measure(client_tools) <= _INLINE_BYTES:
            return build()
        return await asyncio.to_thread(build)
    except AdapterError as refused:
        return refused


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


def check_unique(tools: Iterable[BaseTool]) -> list[BaseTool]:
    """Return `tools` as a list, refusing two tools with one name at start-up."""
    seen: dict[str, BaseTool] = {}
    for each in tools:
        if each.name in seen:
            raise ConfigurationError(f"two tools are named {each.name!r}")
        seen[each.name] = each
    return list(seen.values())
