"""Who keeps the conversation: the client (the default) or the server (`Adapter(history="server")`).

Either way a run stores only what it adds, and a resume restates the history only when the client's
messages lack the calls it answers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from agui import FRONTEND_TOOLS, new_id, resolved, run_input, user
from forwarding_store import ForwardingStore

from adapter import Adapter, ConfigurationError
from adapter.backends import ScriptedBackend
from adapter.stores import JournalAppend, MemoryStore, ThreadChange

if TYPE_CHECKING:
    from conftest import Kit, MakeAdapter, Serve


class RecordingStore(ForwardingStore[MemoryStore]):
    """A MemoryStore that keeps every change it was asked to write, alone or with journal events."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.changes: list[ThreadChange] = []

    async def save(self, thread_id: str, change: ThreadChange, **expected: Any) -> int:
        self.changes.append(change)
        return await super().save(thread_id, change, **expected)

    async def save_and_append(
        self, thread_id: str, change: ThreadChange, journal: JournalAppend, **expected: Any
    ) -> tuple[int, bool]:
        self.changes.append(change)
        return await super().save_and_append(thread_id, change, journal, **expected)


def seen_by_model(backend: ScriptedBackend) -> list[str]:
    return [message.id for message in backend.requests[-1].messages]


async def stored_ids(served: Any, thread_id: str) -> list[str]:
    response = await served.client.get(f"/threads/{thread_id}")
    return [message["id"] for message in response.json()["messages"]]


async def test_server_kept_history_lets_a_client_send_only_what_is_new(
    serve: Serve, make_adapter: MakeAdapter, backend: ScriptedBackend
) -> None:
    served = await serve(make_adapter(history="server"))
    thread = served.client.thread()
    await thread.say("where is order A17")
    earlier = await stored_ids(served, thread.id)

    latest = user("hello")
    reply = await served.client.post(run_input(thread.id, [latest]))

    assert reply.outcome == {"type": "success"}
    assert seen_by_model(backend)[: len(earlier)] == earlier
    ids = await stored_ids(served, thread.id)
    assert ids[: len(earlier) + 1] == [*earlier, latest["id"]]
    assert len(ids) == len(earlier) + 2


async def test_server_kept_history_adds_each_resent_message_once(serve: Serve, make_adapter: MakeAdapter) -> None:
    served = await serve(make_adapter(history="server"))
    thread = served.client.thread()

    await thread.say("where is order A17")
    await thread.say("hello")

    ids = await stored_ids(served, thread.id)
    assert len(ids) == len(set(ids)) == len(thread.messages)


async def test_a_client_branch_is_what_the_model_sees_and_the_record_keeps_what_it_left_out(
    serve: Serve, make_adapter: MakeAdapter, backend: ScriptedBackend
) -> None:
    served = await serve(make_adapter())
    thread = served.client.thread()
    await thread.say("where is order A17")
    first_user = thread.messages[0]
    before = await stored_ids(served, thread.id)

    branch = [first_user, user("hello")]  # the client dropped the rest of the first turn: it regenerates
    reply = await served.client.post(run_input(thread.id, branch))

    assert reply.outcome == {"type": "success"}
    assert seen_by_model(backend)[:2] == [m["id"] for m in branch]
    ids = await stored_ids(served, thread.id)
    assert ids[: len(before)] == before  # nothing the record held is dropped
    # the new message and the reply
    assert ids[len(before)] == branch[1]["id"]
    assert len(ids) == len(before) + 2


async def test_a_new_run_stores_only_the_messages_it_adds(serve: Serve, make_adapter: MakeAdapter) -> None:
    store = RecordingStore()
    served = await serve(make_adapter(store=store))
    thread = served.client.thread()
    await thread.say("where is order A17")
    held = len(thread.messages)
    store.changes.clear()

    await thread.say("hello")

    (change,) = store.changes
    assert change.keep is None
    assert change.replace == {}
    assert [m.id for m in change.append] == [m["id"] for m in thread.messages[held:]]


async def test_a_resume_appends_the_answers_without_rewriting_the_thread(
    serve: Serve, make_adapter: MakeAdapter, kit: Kit
) -> None:
    store = RecordingStore()
    served = await serve(make_adapter(store=store))
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    store.changes.clear()

    reply = await thread.resume(resolved(interrupt["id"], {"approved": True}))

    assert reply.outcome == {"type": "success"}
    assert kit.count("send_email") == 1
    claim, closed, finished = store.changes
    assert claim.claim
    assert claim.append == ()
    assert claim.keep is None
    # the answer, its record
    assert [m.role for m in closed.append] == ["tool", "activity"]
    assert closed.keep is None
    assert [m.role for m in finished.append] == ["assistant"]
    assert finished.keep is None


async def test_a_resume_whose_client_holds_the_calls_restates_nothing(serve: Serve, make_adapter: MakeAdapter) -> None:
    served = await serve(make_adapter())
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts

    reply = await thread.resume(resolved(interrupt["id"], {"approved": True}))

    assert "MESSAGES_SNAPSHOT" not in reply.types
    assert reply.types.index("TOOL_CALL_RESULT") < reply.types.index("RUN_FINISHED")


async def test_a_resume_without_messages_restates_the_history_first(serve: Serve, make_adapter: MakeAdapter) -> None:
    served = await serve(make_adapter())
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    held = [m["id"] for m in thread.messages]

    body = run_input(thread.id, [], tools=FRONTEND_TOOLS, resume=[resolved(interrupt["id"], {"approved": True})])
    reply = await served.client.post(body, resumed=True)

    assert reply.types.index("MESSAGES_SNAPSHOT") < reply.types.index("TOOL_CALL_RESULT")
    assert [m["id"] for m in reply.of("MESSAGES_SNAPSHOT")[0]["messages"]] == held


@pytest.mark.parametrize("history", ["client", "server"])
async def test_either_mode_serves_a_whole_conversation(serve: Serve, make_adapter: MakeAdapter, history: str) -> None:
    served = await serve(make_adapter(history=history))
    thread = served.client.thread(tools=FRONTEND_TOOLS)
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    await thread.resume(resolved(interrupt["id"], {"approved": True}))

    reply = await thread.say("where is order A17")

    assert reply.outcome == {"type": "success"}
    assert await stored_ids(served, thread.id) == [m["id"] for m in thread.messages]


def test_an_unknown_history_mode_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="history"):
        Adapter(ScriptedBackend(), history="browser")  # type: ignore[arg-type]


async def test_a_thread_id_never_seen_starts_empty_in_server_mode(
    serve: Serve, make_adapter: MakeAdapter, backend: ScriptedBackend
) -> None:
    served = await serve(make_adapter(history="server"))
    first = user("hello")

    await served.client.post(run_input(new_id("thread"), [first]))

    assert seen_by_model(backend) == [first["id"]]
