"""A suspended turn outlives the process that suspended it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agui import FRONTEND_TOOLS, resolved

from adapter import Adapter
from adapter.backends import ScriptedBackend
from adapter.stores import SQLiteStore

if TYPE_CHECKING:
    from collections.abc import Callable

    from conftest import Kit, Serve


async def test_resume_lands_on_a_new_instance_over_the_same_database(
    serve: Serve, kit: Kit, tmp_path: Path, make_backend: Callable[[], ScriptedBackend]
) -> None:
    database = tmp_path / "t.db"
    first_backend = make_backend()
    first_server = await serve(Adapter(first_backend, tools=kit.tools, store=SQLiteStore(database)))
    first_thread = first_server.client.thread(tools=FRONTEND_TOOLS)
    suspended = await first_thread.say("refund order A17")
    (interrupt,) = suspended.interrupts
    await first_server.stop()

    second_backend = make_backend()
    second_server = await serve(Adapter(second_backend, tools=kit.tools, store=SQLiteStore(database)))
    second_thread = second_server.client.thread(tools=FRONTEND_TOOLS, thread_id=first_thread.id)
    second_thread.messages = first_thread.messages

    resumed = await second_thread.resume(resolved(interrupt["id"], {"approved": True}))

    assert resumed.outcome == {"type": "success"}
    assert resumed.results()[interrupt["toolCallId"]]["content"] == "refunded 42.5 on A17"
    assert kit.calls["refund_order"] == [{"order_id": "A17", "amount": 42.5}]
    assert kit.count("lookup_order") == 1
    assert len(first_backend.requests) == 2
    assert len(second_backend.requests) == 1
    assert "refund_order returned refunded 42.5 on A17" in resumed.text


async def test_replay_on_a_new_instance_runs_nothing(
    serve: Serve, kit: Kit, tmp_path: Path, make_backend: Callable[[], ScriptedBackend]
) -> None:
    database = tmp_path / "t.db"
    first_server = await serve(Adapter(make_backend(), tools=kit.tools, store=SQLiteStore(database)))
    thread = first_server.client.thread()
    (interrupt,) = (await thread.say("email ceo@x.io")).interrupts
    entry = resolved(interrupt["id"], {"approved": True})
    assert (await thread.resume(entry)).outcome == {"type": "success"}
    await first_server.stop()
    second_server = await serve(Adapter(make_backend(), tools=kit.tools, store=SQLiteStore(database)))
    thread.client = second_server.client

    replay = await thread.resume(entry)

    assert replay.types == ["RUN_STARTED", "RUN_FINISHED"]
    assert replay.outcome == {"type": "success"}
    assert kit.count("send_email") == 1


class ClosableBackend(ScriptedBackend):
    closed = False

    async def aclose(self) -> None:
        self.closed = True


async def test_closing_the_adapter_closes_its_backend_and_store(tmp_path: Any) -> None:
    backend = ClosableBackend()
    store = SQLiteStore(tmp_path / "t.db")
    adapter = Adapter(backend, store=store)

    await adapter.aclose()

    assert backend.closed
    with pytest.raises(RuntimeError):
        await store.load("t")
