"""The official TypeScript clients take what the protocol carries besides text and calls, from this adapter.

`@ag-ui/client` 1.0 keeps a reasoning message with its encrypted value, a tool's content parts, and a sub-agent's
events; 0.0.59 (no `protocolVersion`: CopilotKit's and the Dojo's) gets a result's text, and reads the rest as
well. The drivers are tests/node/protocol.mjs, through `drive-protocol.mjs` in each client's folder.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import pytest
from ag_ui.core import ImagePart, TextPart, ToolMessage, UrlSource
from protocol_models import upstream
from starlette.applications import Starlette
from ts_clients import drive
from upstreams.scripted import text

from adapter import Adapter, create_app, mount, tool
from adapter.backends import AGUIUpstream, BackendItem, ModelRequest, ReasoningDelta, TextDelta, ToolCall

if TYPE_CHECKING:
    from conftest import Serve

pytestmark = pytest.mark.needs_node

SUBAGENT: list[dict[str, Any]] = [
    {"type": "SUBAGENT_STARTED", "subagentRunId": "sub-1", "name": "researcher"},
    {"type": "TEXT_MESSAGE_START", "messageId": "sub-m1", "role": "assistant", "subagentRunId": "sub-1"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "sub-m1", "delta": "looking", "subagentRunId": "sub-1"},
    {"type": "TEXT_MESSAGE_END", "messageId": "sub-m1", "subagentRunId": "sub-1"},
    {"type": "SUBAGENT_FINISHED", "subagentRunId": "sub-1"},
]


class Thinks:
    """A model that reasons (signed) before it greets."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield ReasoningDelta("The user greets me.", encrypted_value="c2ln+/==")
        yield TextDelta("Hello!")


class Charts:
    """A model that draws the chart, then shows it."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        answered = isinstance(request.messages[-1], ToolMessage)
        yield TextDelta("Here it is.") if answered else ToolCall(f"call-{len(request.messages)}", "sales_chart")


@tool
def sales_chart() -> list[Any]:
    """Draw the sales chart."""
    return [TextPart(text="Sales by month"), ImagePart(source=UrlSource(value="https://charts.test/sales.png"))]


@pytest.fixture
async def base_url(serve: Serve) -> str:
    """One endpoint per feature: /reasoning/, /parts/, /subagent/."""
    subagent = AGUIUpstream(upstream([[*SUBAGENT, *text("Found 3.")] for _ in range(4)]))
    app = Starlette(
        routes=[
            mount("/reasoning", create_app(Adapter(Thinks()))),
            mount("/parts", create_app(Adapter(Charts(), tools=[sales_chart]))),
            mount("/subagent", create_app(Adapter(subagent))),
        ]
    )
    served = await serve(app)
    return served.url


@pytest.mark.slow
@pytest.mark.parametrize("package", ["client-0.0.59", "client-1.0"])
async def test_the_client_takes_reasoning_parts_and_subagents(base_url: str, package: str) -> None:
    result = await asyncio.to_thread(drive, package, base_url, "pending", "drive-protocol.mjs")

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"^client-\S+: (\d+) of \1 scenarios passed$", result.stdout, re.MULTILINE), output
    assert "[ag-ui]" not in output, output
