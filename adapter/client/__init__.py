"""A Python AG-UI client: runs an agent over HTTP or in-process, checks each stream, keeps the conversation.

    async with AGUIClient("http://127.0.0.1:8000/agui/") as client:
        thread = client.thread(tools=[navigate])
        run = await thread.say("refund order A100")
        (interrupt,) = run.interrupts
        run = await thread.resume(approved(interrupt, edited_args={"order_id": "A100", "amount": 5}))

See docs/client.md.
"""

from adapter._ids import new_id
from adapter.client._calls import CallReader, StreamedCall
from adapter.client._client import AGUIClient, Target, Thread
from adapter.client._errors import ClientError, ProtocolError, RequestRefused, StreamDropped, StreamLimitExceeded
from adapter.client._gates import GatedCall, gated_call
from adapter.client._lifecycle import Lifecycle
from adapter.client._limits import StreamLimitError, StreamLimits
from adapter.client._messages import SERVER_ROLES, fold_messages
from adapter.client._resume import approved, cancelled, denied, resolved
from adapter.client._run import Run
from adapter.client._sse import Frame, ParsedBody, SSEDecoder, parse_sse, read_sse

__all__ = [
    "SERVER_ROLES",
    "AGUIClient",
    "CallReader",
    "ClientError",
    "Frame",
    "GatedCall",
    "Lifecycle",
    "ParsedBody",
    "ProtocolError",
    "RequestRefused",
    "Run",
    "SSEDecoder",
    "StreamDropped",
    "StreamLimitError",
    "StreamLimitExceeded",
    "StreamLimits",
    "StreamedCall",
    "Target",
    "Thread",
    "approved",
    "cancelled",
    "denied",
    "fold_messages",
    "gated_call",
    "new_id",
    "parse_sse",
    "read_sse",
    "resolved",
]
