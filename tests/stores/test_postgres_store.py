from __future__ import annotations

import sys

import pytest

from adapter import PostgresStore


def test_without_the_extra_constructing_it_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg_pool", None)  # as if `pip install 'agui-adapter[postgres]'` never ran

    with pytest.raises(ImportError, match=r"pip install 'agui-adapter\[postgres\]'"):
        PostgresStore("postgresql://nowhere/db")


async def test_after_aclose_every_call_is_refused() -> None:
    store = PostgresStore("postgresql://127.0.0.1:1/never-opened")

    await store.aclose()
    await store.aclose()

    with pytest.raises(RuntimeError, match="closed"):
        await store.load("t1")
