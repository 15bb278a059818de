"""A client that leaves in the middle of a resume: the answers are applied once, and nothing is lost."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from agui import FRONTEND_TOOLS, resolved, run_input

if TYPE_CHECKING:
    from conftest import Kit, MakeAdapter, Serve


@pytest.mark.parametrize("on_disconnect", ["continue", "stop"])
async def test_an_approved_tool_finishes_and_is_recorded_once_when_the_client_leaves(
    serve: Serve, make_adapter: MakeAdapter, kit: Kit, on_disconnect: Any
) -> None:
    """The run's driver applies the answers either way; with "stop" the run then stops, and its resume says so."""
    served = await serve(make_adapter(on_disconnect=on_disconnect))
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    kit.delay = 0.5
    entry = resolved(interrupt["id"], {"approved": True})
    body = run_input(thread.id, thread.messages, tools=FRONTEND_TOOLS, resume=[entry])

    async with served.http.stream("POST", f"{served.url}/", json=body) as response:
        async for chunk in response.aiter_bytes():
            assert b"RUN_STARTED" in chunk
            break  # the client leaves while send_email is still running

    for _ in range(100):
        stored = (await served.client.get(f"/threads/{thread.id}")).json()
        if any(m["role"] == "tool" and m.get("content") == "sent to ceo@x.io" for m in stored["messages"]):
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the approved call was never recorded")
    assert kit.count("send_email") == 1
    assert stored["interrupts"] == []

    for _ in range(100):
        replay = await thread.resume(entry, clean=False)
        if "RUN_ERROR" not in replay.types or replay.error.get("code") != "RESUME_CONFLICT":
            break
        await asyncio.sleep(0.05)
    if on_disconnect == "stop":
        assert replay.types == ["RUN_STARTED", "RUN_ERROR"]
        assert replay.error["code"] == "RUN_INTERRUPTED"
    else:  # the run went on to its end: the replay ends as it did
        assert replay.types == ["RUN_STARTED", "RUN_FINISHED"]
    assert kit.count("send_email") == 1
    stored = (await served.client.get(f"/threads/{thread.id}")).json()
    assert [m.get("content") for m in stored["messages"] if m["role"] == "tool"] == ["sent to ceo@x.io"]

    thread.messages = stored["messages"]
    after = await thread.say("hello")
    assert after.outcome == {"type": "success"}
