"""The tools one run may use: the server's, plus the schema-only tools the client declared."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from ag_ui.core import Tool

from adapter._errors import ConfigurationError, InvalidClientTool, ToolNameConflict
from adapter._tools import BaseTool, ClientTool
from schema_tools import STRICT_TOOL_POLICY, SchemaPolicy, SchemaPolicyError, check_schema


class Toolset:
    """The tools one run may use: the server's, plus the client's schema-only ones."""

    def __init__(
        self,
        server_tools: Iterable[BaseTool],
        client_tools: Sequence[Tool] = (),
        *,
        client_policy: SchemaPolicy | None = STRICT_TOOL_POLICY,
    ) -> None:
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
                _check_client_schemas(index, declared, wrapped, client_policy)
            self._tools[declared.name] = wrapped

    def get(self, name: str) -> BaseTool | None:
        """The tool called `name`, if this run has one."""
        return self._tools.get(name)

    def specs(self) -> list[Tool]:
        """Every tool as the model sees it."""
        return [each.spec() for each in self._tools.values()]


def _check_client_schemas(index: int, declared: Tool, tool: ClientTool, policy: SchemaPolicy) -> None:
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
        try:
            check_schema(schema, policy=rules)
        except SchemaPolicyError as exc:
            details = [
                {"schema": where, "pointer": v.pointer, "rule": v.rule, "message": v.message} for v in exc.violations
            ]
            message = f"the client tool {tool.name!r} has an unacceptable schema at {where}"
            raise InvalidClientTool(message, details=details) from None


def check_unique(tools: Iterable[BaseTool]) -> list[BaseTool]:
    """Return `tools` as a list, refusing two tools with one name at start-up."""
    seen: dict[str, BaseTool] = {}
    for each in tools:
        if each.name in seen:
            raise ConfigurationError(f"two tools are named {each.name!r}")
        seen[each.name] = each
    return list(seen.values())
