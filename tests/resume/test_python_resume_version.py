"""`Adapter.resume` is a 1.0 run: its events are never downgraded for a peer older than AG-UI 1.0 (`_compat`).

A run whose input has no `protocolVersion` gets the lossless downgrade a 0.x client needs: tool results as text
only. The input `Adapter.resume` builds is the adapter's own, so it says 1.0, and a tool's media stays media.
"""

from __future__ import annotations

from ag_ui.core import (
    ImagePart,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    ToolCallResultEvent,
    UserMessage,
)

from adapter import Adapter, tool
from adapter.backends import Call, Rule, ScriptedBackend

PIXEL = "iVBORw0KGgo="  # a base64 value; its bytes are never decoded here


async def test_an_approved_tool_s_media_reaches_a_python_resume_as_media() -> None:
    @tool(requires_approval=True)
    async def snapshot() -> ImagePart:
        """Take a picture."""
        return ImagePart(source={"type": "data", "value": PIXEL, "mimeType": "image/png"})

    rules = [Rule(r"snap", steps=[[Call("snapshot")]], reply="Taken.")]
    adapter = Adapter(ScriptedBackend(rules), tools=[snapshot])
    opening = RunAgentInput(
        thread_id="t1", run_id="r0", messages=[UserMessage(id="u1", content="snap")], tools=[], context=[]
    )
    finished = [event async for event in adapter.run(opening)][-1]
    assert isinstance(finished, RunFinishedEvent)
    assert isinstance(finished.outcome, RunFinishedInterruptOutcome)
    (interrupt,) = finished.outcome.interrupts

    approved = [{"interruptId": interrupt.id, "status": "resolved", "payload": {"approved": True}}]
    events = [event async for event in adapter.resume("t1", approved)]

    (result,) = [event for event in events if isinstance(event, ToolCallResultEvent)]
    assert isinstance(result.content, list)
    assert [part.type for part in result.content] == ["image"]  # a downgrade would have left text alone
    assert events[-1].type == "RUN_FINISHED"
