"""VER-5: a client from before protocol versioning (no `protocolVersion`) gets outcomes it can parse."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest
from agui import FRONTEND_TOOLS, new_id, run_input, user

if TYPE_CHECKING:
    from conftest import Connect


@pytest.mark.parametrize("declared", [None, "1.0"], ids=["absent", "1.0"])
async def test_pending_ids_are_left_out_only_for_a_client_that_declares_no_version(
    connect: Connect, declared: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """@ag-ui/client 0.0.x parses a success outcome strictly and rejects the whole run over `pendingToolCallIds`;
    the server's log says so, for a newcomer whose hand-written input left the version out."""
    caplog.set_level(logging.INFO, logger="adapter._compat")
    client = await connect(frontend_outcome="pending")
    body = run_input(new_id("thread"), [user("toast twice")], tools=FRONTEND_TOOLS, protocolVersion=declared)
    if declared is None:
        del body["protocolVersion"]

    reply = await client.post(body)

    ids = [call["toolCallId"] for call in reply.calls]
    assert len(ids) == 2
    assert reply.started["protocolVersion"] == "1.0"
    said = [r.getMessage() for r in caplog.records if "declared no protocolVersion" in r.getMessage()]
    if declared is None:
        assert reply.outcome == {"type": "success"}
        assert len(said) == 1
        assert str(ids) in said[0]
        assert '"protocolVersion": "1.0"' in said[0]
    else:
        assert reply.outcome == {"type": "success", "pendingToolCallIds": ids}
        assert said == []


async def test_an_interrupt_reaches_a_client_that_declares_no_version_unchanged(connect: Connect) -> None:
    client = await connect(frontend_outcome="interrupt")
    body = run_input(new_id("thread"), [user("go to orders")], tools=FRONTEND_TOOLS)
    del body["protocolVersion"]

    reply = await client.post(body)

    (call,) = reply.calls
    assert reply.outcome["type"] == "interrupt"
    assert [i["toolCallId"] for i in reply.interrupts] == [call["toolCallId"]]
