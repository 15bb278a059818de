"""Several people on one served adapter: each names itself in a header, and a policy says what each may do.

The fixtures `offices` and `office` (tests/conftest.py) open an `Office` per test and close it afterwards.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import httpx
from agui import FRONTEND_TOOLS, Client, Thread
from starlette.requests import Request

from adapter import Action

if TYPE_CHECKING:
    from conftest import Served


def by_header(request: Request) -> str | None:
    """The test's stand-in for authentication: the caller names itself in `x-user`."""
    return request.headers.get("x-user")


def manager_may_read_and_approve(principal: str | None, owner: str | None, action: Action) -> bool:
    """Owners do anything on their threads; the manager also reads and approves everyone's."""
    if owner is None or principal == owner:
        return True
    return principal == "manager" and action in ("read", "approve")


def four_eyes(principal: str | None, owner: str | None, action: Action) -> bool:
    """Someone other than the owner decides an approval; everything else is the owner's."""
    if action == "approve":
        return principal is not None and principal != owner
    return owner is None or principal == owner


class Office:
    """One served adapter and a client per person, each naming itself in a header."""

    def __init__(self, served: Served, url: str | None = None) -> None:
        self.served = served
        self.url = url or served.url
        self.clients: list[httpx.AsyncClient] = []

    def client(self, name: str | None) -> Client:
        headers = {"x-user": name} if name else {}
        self.clients.append(httpx.AsyncClient(headers=headers, timeout=10))
        return Client(self.clients[-1], self.url)

    async def close(self) -> None:
        for client in self.clients:
            await client.aclose()

    def thread(self, name: str | None, thread_id: str | None = None) -> Thread:
        return self.client(name).thread(tools=FRONTEND_TOOLS, thread_id=thread_id)

    async def stored(self, thread_id: str) -> Any:
        assert self.served.adapter is not None
        return await self.served.call(self.served.adapter.store.load(thread_id))


OpenOffice = Callable[..., Awaitable[Office]]
