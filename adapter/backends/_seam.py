"""The backend seam: the request a backend gets for one assistant step, the items it yields, and `Backend`.

Every backend is written against these (`adapter.backends` is their door); the engine translates the
items into AG-UI events (`adapter._run._translate`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ag_ui.core import AssistantMessage, BaseEvent, ContentPart, Context, Interrupt, Message, ResumeEntry, Tool

from adapter._types import JSON


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """What the model may see for one assistant step, and nothing else.

    `messages` and `tools` are `ag_ui.core` pydantic models with snake_case attributes
    (`message.tool_calls`, `message.tool_call_id`, `tool.parameters`); `wire_json` gives the camelCase JSON.
    """

    messages: Sequence[Message]
    """Model-visible messages only: no activity messages, no tool call without its answer.

    Reasoning messages (`ReasoningMessage`, role "reasoning") stay in their place, before the assistant
    message they led to, with their `encrypted_value`: a backend that takes reasoning back sends them (an
    upstream AG-UI agent gets them as they came), any other skips them.
    """
    tools: Sequence[Tool]
    """Backend, injected frontend and control tools, as the model should see them (`is_client_tool` tells which)."""
    context: Sequence[Context] = ()
    state: JSON = None
    thread_id: str = ""
    run_id: str = ""
    resume: Sequence[ResumeEntry] = ()
    """Answers to interrupts the backend raised itself (`BackendInterrupt`), passed on unchanged."""
    client_tool_names: frozenset[str] = frozenset()
    """The names in `tools` that the client declared (`RunAgentInput.tools`): the page runs them, not the server."""
    forwarded_props: Any = None
    """The client's `RunAgentInput.forwardedProps`, as it sent them (None when it sent none)."""

    def is_client_tool(self, name: str) -> bool:
        """Whether the tool called `name` is the client's (run by the page) rather than the server's.

        Server tools are the adapter's `tools=` and the control tool `request_user_input`; the model may
        call either kind, and the adapter decides what a call does.
        """
        return name in self.client_tool_names

    def tool_call_names(self) -> dict[str, str]:
        """Tool call id -> the name of the tool it called, over `messages`: which tool a `ToolMessage` answers.

        `request.tool_call_names()[tool_message.tool_call_id]` is the tool's name.
        """
        return {
            call.id: call.function.name
            for message in self.messages
            if isinstance(message, AssistantMessage)
            for call in message.tool_calls or ()
        }


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of assistant text, streamed as it arrives."""

    text: str
    message_id: str | None = field(default=None, compare=False)
    """The id the backend gave the assistant message, when it keeps its own history (see `ToolCall`)."""


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning, streamed as it arrives, before the text and calls it leads to.

    The engine streams it as a reasoning message (`REASONING_START`, `REASONING_MESSAGE_START`, `..._CONTENT`,
    then `..._END` and `REASONING_END` once anything else comes) and stores it as a `ReasoningMessage`
    right before the assistant message that follows it; later steps find it in `ModelRequest.messages`.
    """

    text: str
    message_id: str | None = field(default=None, compare=False)
    """The id the backend gave the reasoning message: another id than the open one's starts a new one.
    None: the open one goes on, or one with an id the engine mints starts."""
    encrypted_value: str | None = None
    """The provider's opaque artefact for this reasoning message (a thinking signature): streamed untouched as a
    `REASONING_ENCRYPTED_VALUE` and kept on the stored message, so that it goes back with it; the last one stands."""
    encrypted_value_type: str | None = None
    """What kind of artefact `encrypted_value` is (AG-UI 1.1's `encryptedValueType`, e.g. a provider's name): kept
    and returned beside the value, never read; left out for a peer that declared AG-UI 1.0."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the model made. `arguments` is the JSON text as the model wrote it."""

    id: str
    name: str
    arguments: str = "{}"
    message_id: str | None = field(default=None, compare=False)
    """The id of the assistant message that made the call, when the backend names it.

    A backend that keeps its own copy of the conversation (an upstream agent with a checkpointer)
    merges the messages it is sent by id; keeping its ids means it never sees one message twice.
    None, or an id the thread already uses: the engine mints one. Message ids are names, not part of
    an item's equality.
    """


@dataclass(frozen=True, slots=True)
class ToolCallChunk:
    """A piece of a tool call's arguments, as the model streams them, before the whole `ToolCall`.

    The run streams each piece as a `TOOL_CALL_ARGS` at once (a page renders the arguments as they
    grow, and predicted state follows them). The complete `ToolCall` with the same id must still
    follow: it ends the call, and its `arguments` are what the call runs with.
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for the model call behind one step, when the backend knows them."""

    input_tokens: int
    output_tokens: int
    provider: str | None = None
    model: str | None = None
    reasoning_tokens: int | None = None
    """Of `output_tokens`, those spent reasoning, when the model server says."""
    cached_input_tokens: int | None = None
    """Of `input_tokens`, those read from the provider's prompt cache, when it says."""
    cache_write_input_tokens: int | None = None
    """Of `input_tokens`, those written to the provider's prompt cache, when it says."""


@dataclass(frozen=True, slots=True)
class ExecutedToolCall:
    """A tool call the backend ran itself, with its result (an agent that owns some of its tools)."""

    id: str
    name: str
    arguments: str
    content: str | Sequence[ContentPart]
    """The result: text, or content parts (text, image, audio, ...) kept as parts."""
    error: str | None = None
    message_id: str | None = field(default=None, compare=False)
    """The assistant message's id, as for `ToolCall`."""
    result_id: str | None = field(default=None, compare=False)
    """The id of the tool message that holds the result, when the backend names it."""


@dataclass(frozen=True, slots=True)
class DeferredToolCall:
    """A call the backend made and will answer itself later, once a person answers its interrupt about it.

    The engine streams the call and keeps it unanswered in the conversation while the turn waits.
    """

    id: str
    name: str
    arguments: str
    message_id: str | None = field(default=None, compare=False)
    """The assistant message's id, as for `ToolCall`."""


@dataclass(frozen=True, slots=True)
class LateToolResult:
    """The backend's answer to a call it deferred (in an earlier step, or earlier in this one).

    A provisional one (a result the backend reported before its interrupt) is kept, not streamed: it
    becomes the answer only if the backend gives no other before it ends a step without an interrupt.
    """

    tool_call_id: str
    content: str | Sequence[ContentPart]
    """The result: text, or content parts kept as parts."""
    error: str | None = None
    message_id: str | None = field(default=None, compare=False)
    """The id of the tool message that holds the result, when the backend names it."""
    provisional: bool = False


@dataclass(frozen=True, slots=True)
class Passthrough:
    """An AG-UI event the backend produced that the engine does not derive itself, forwarded as it is.

    State, steps, reasoning, activity, sub-agents' work, custom and raw events. The engine closes any step,
    reasoning or sub-agent's message or call it left open if the run fails. Reasoning events of the agent itself
    (no `subagent_run_id`) are also stored as reasoning messages, with the `REASONING_ENCRYPTED_VALUE`s that
    name them, and state events move the turn's state.
    """

    event: BaseEvent


@dataclass(frozen=True, slots=True)
class BackendInterrupt:
    """The backend itself stopped for outside input (an upstream agent's own interrupts).

    The run ends with these interrupts, ids unchanged; their resume entries are handed back to the
    backend in the next `ModelRequest.resume`, unchanged.
    """

    interrupts: Sequence[Interrupt]


BackendItem: TypeAlias = (
    TextDelta
    | ReasoningDelta
    | ToolCall
    | ToolCallChunk
    | Usage
    | ExecutedToolCall
    | DeferredToolCall
    | LateToolResult
    | Passthrough
    | BackendInterrupt
)


@runtime_checkable
class Backend(Protocol):
    """Any agent backend: given the conversation, stream one assistant step."""

    def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        """Yield the text deltas and tool calls of one assistant step."""
        ...
