"""A LangGraph agent behind ag-ui-langgraph, with a scripted chat model and `interrupt()` approvals.

"go to orders"      -> calls the client's `navigate` tool (the run ends; the answer comes next run)
"delete the draft"  -> calls its own `delete_file`, which asks for approval with `interrupt()`
"delete both"       -> two `delete_file` calls in one step, each asking in parallel (`Send`)
a tool's answer     -> "Done: <tool> said <content>"
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, Send, interrupt

APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}},
    "required": ["approved"],
}


def _reply(messages: Sequence[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, ToolMessage):
        name = next(
            (
                c["name"]
                for m in messages
                if isinstance(m, AIMessage)
                for c in m.tool_calls
                if c["id"] == last.tool_call_id
            ),
            "?",
        )
        return AIMessage(content=f"Done: {name} said {last.content}")
    prompt = str(last.content) if isinstance(last, HumanMessage) else ""
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    if "go to orders" in prompt:
        return _calls(turn, ("navigate", {"path": "/orders"}))
    if "delete both" in prompt:
        return _calls(turn, ("delete_file", {"path": "/tmp/a.txt"}), ("delete_file", {"path": "/tmp/b.txt"}))
    if "delete the draft" in prompt:
        return _calls(turn, ("delete_file", {"path": "/tmp/draft.txt"}))
    return AIMessage(content="Hello from LangGraph.")


def _calls(turn: int, *calls: tuple[str, dict[str, Any]]) -> AIMessage:
    tool_calls = [{"id": f"lg-{turn}-{i}-{name}", "name": name, "args": args} for i, (name, args) in enumerate(calls)]
    return AIMessage(content="", tool_calls=tool_calls)


class ScriptedChatModel(BaseChatModel):
    """A chat model whose reply depends only on the conversation it is given (and streams it)."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=_reply(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = _reply(messages)
        if reply.content:
            yield ChatGenerationChunk(message=AIMessageChunk(content=str(reply.content)))
        for i, c in enumerate(reply.tool_calls):  # a name first, then the arguments, as providers stream them
            started = {"name": c["name"], "args": "", "id": c["id"], "index": i}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[started]))
            arguments = {"name": None, "args": json.dumps(c["args"]), "id": None, "index": i}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[arguments]))


class State(MessagesState):
    tools: list[Any]


class ResumeByIdAgent(LangGraphAgent):  # type: ignore[misc]  # ag-ui-langgraph ships no type information
    """The documented workaround for parallel interrupts: resume each one by its id.

    ag-ui-langgraph 0.0.47 sends several answers as one `{"__agui_resume_map__": ...}` value, which
    LangGraph refuses while more than one interrupt is pending.
    """

    def _build_command_from_agui_resume(self, entries: list[Any], *, open_interrupts: Any = None) -> Command[Any]:
        if len(entries) == 1:
            command: Command[Any] = super()._build_command_from_agui_resume(entries, open_interrupts=open_interrupts)
            return command
        return Command(resume={e.interrupt_id: e.payload if e.status == "resolved" else None for e in entries})


@dataclass
class LangGraphUpstream:
    """The graph, its checkpointer and a record of every file it really deleted."""

    deleted: list[str] = field(default_factory=list)
    checkpointer: InMemorySaver = field(default_factory=InMemorySaver)
    resume_by_id: bool = False
    """Serve `ResumeByIdAgent` instead of ag-ui-langgraph's own agent class."""

    def graph(self) -> Any:
        model = ScriptedChatModel()

        def agent(state: State) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        def route(state: State) -> list[Send] | str:
            last = state["messages"][-1]
            own = [c for c in getattr(last, "tool_calls", []) if c["name"] == "delete_file"]
            return [Send("delete_file", c) for c in own] if own else END

        def delete_file(call: dict[str, Any]) -> dict[str, Any]:
            path = call["args"]["path"]
            answer = interrupt(
                {
                    "reason": "tool_call",
                    "toolCallId": call["id"],
                    "message": f"Delete {path}?",
                    "responseSchema": APPROVAL_SCHEMA,
                }
            )
            if isinstance(answer, dict) and answer.get("approved") is True:
                self.deleted.append(path)
                content = f"deleted {path}"
            else:
                content = f"kept {path}: not approved"
            return {"messages": [ToolMessage(content=content, tool_call_id=call["id"], name="delete_file")]}

        builder = StateGraph(State)
        builder.add_node("agent", agent)
        # Reached by Send with one tool call, not the graph's State; add_node's types know only the State.
        builder.add_node("delete_file", delete_file)  # type: ignore[arg-type]
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", route, ["delete_file", END])
        builder.add_edge("delete_file", "agent")
        return builder.compile(checkpointer=self.checkpointer)

    @property
    def app(self) -> FastAPI:
        agent = (ResumeByIdAgent if self.resume_by_id else LangGraphAgent)(
            name="support",
            graph=self.graph(),
            emit_interrupt_outcome=True,
            enable_legacy_on_interrupt_event=False,
            emit_raw_events=False,
        )
        app = FastAPI()
        add_langgraph_fastapi_endpoint(app, agent, "/")
        return app
