"""The parsed-thread cache never serves a thread that is no longer stored: a purged and recreated one least of all.

The property: over any sequence of saves through two adapters (replicas, each with its own cache, each reading a
thread by its head first from the first message on), deletes and recreations by another process (the adapters
are not told), and reads, every read through a cache gives back exactly the messages the store holds, even where
the recreated thread has the same id, version and number of messages as the one a cache kept.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from ag_ui.core import UserMessage
from hypothesis import given, settings
from hypothesis import strategies as st

# Private on purpose: the handle and the cache it reads through are what this checks.
from adapter._thread._cache import HEAD_FIRST, ParsedStore, ParsedThreads
from adapter._thread._handle import RecordHandle
from adapter._thread._record import message_text, stored_message
from adapter.stores import SQLiteStore, StoredThread, ThreadChange

THREAD = "t"

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["save", "delete", "recreate", "resume"]),
        st.integers(0, 1),  # which adapter
        st.integers(1, 3),
        st.text(max_size=3),
    ),
    max_size=10,
)


def said(marker: str, count: int, at: int) -> list[UserMessage]:
    """`count` messages from position `at`, their text set by `marker`: the same ids with other text elsewhere."""
    return [UserMessage(id=f"m{at + k}", content=f"{marker}:{at + k}") for k in range(count)]


async def _run(steps: list[tuple[str, int, int, str]], directory: str) -> None:
    store = SQLiteStore(Path(directory) / "t.db")
    caches = [ParsedThreads(head_first=0), ParsedThreads(head_first=0)]
    try:
        for kind, which, count, marker in steps:
            head = await store.load(THREAD, since=None)
            if kind == "save":  # through an adapter: its cache keeps what it wrote
                handle = RecordHandle(ParsedStore(store, caches[which]), THREAD)
                await handle.load()
                await handle.finish(said(f"{which}{marker}", count, len(handle.conversation())), "run", None)
            elif kind == "delete":  # another process: no adapter is told
                await store.delete_thread(THREAD)
            elif kind == "recreate" and head is None:
                # Another process makes a thread of the same id, reaching the version and size an earlier one had.
                size = 0
                for version in range(count):
                    added = [stored_message(m) for m in said(f"new-{marker}", 1 + version, size)]
                    await store.save(THREAD, ThreadChange(append=added), expected_version=version)
                    size += len(added)
            elif kind == "resume":
                handle = RecordHandle(ParsedStore(store, caches[which]), THREAD)
                await handle.load()
                stored = await store.load(THREAD)
                texts = [m.json for m in stored.messages] if stored is not None else []
                assert [message_text(m) for m in handle.conversation()] == texts
                assert [m.json for m in handle.stored] == texts
    finally:
        await store.close()


@settings(max_examples=400, deadline=None)
@given(STEPS)
def test_a_changed_purged_or_recreated_thread_never_reuses_the_old_parsed_messages(
    steps: list[tuple[str, int, int, str]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_run(steps, directory))


class ReadsRecorded(SQLiteStore):
    """A SQLiteStore that notes, for each load, whether it read messages (`since` not None) or the head alone."""

    reads: list[bool]

    async def load(self, thread_id: str, *, since: int | None = 0, until: int | None = None) -> StoredThread | None:
        self.reads.append(since is not None)
        return await super().load(thread_id, since=since, until=until)


async def test_a_long_thread_this_adapter_wrote_is_read_again_by_its_head_alone(tmp_path: Path) -> None:
    store = ReadsRecorded(tmp_path / "t.db")
    store.reads = []
    parsed = ParsedThreads()
    try:
        first = RecordHandle(ParsedStore(store, parsed), THREAD)
        await first.load_or_create("a thread")
        history = said("x", HEAD_FIRST, 0)  # as a new run: its messages after the create
        await first.finish(history, "run", None)
        store.reads.clear()
        second = RecordHandle(ParsedStore(store, parsed), THREAD)
        await second.load()

        assert store.reads == [False]
        assert [message_text(m) for m in second.conversation()] == [message_text(m) for m in history]
    finally:
        await store.close()


async def test_what_this_adapter_saved_is_not_validated_again_while_the_head_names_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    parsed = ParsedThreads()
    try:
        first = RecordHandle(ParsedStore(store, parsed), THREAD)
        await first.load()
        history = said("x", 3, 0)
        await first.finish(history, "run", None)
        second = RecordHandle(ParsedStore(store, parsed), THREAD)
        await second.load()
        assert all(read is saved for read, saved in zip(second.conversation(), history, strict=True))

        await store.save(THREAD, ThreadChange(title="renamed"), expected_version=second.version)  # a new state
        third = RecordHandle(ParsedStore(store, parsed), THREAD)
        await third.load()
        assert [message_text(m) for m in third.conversation()] == [message_text(m) for m in history]
        assert not any(read is saved for read, saved in zip(third.conversation(), history, strict=True))
    finally:
        await store.close()
