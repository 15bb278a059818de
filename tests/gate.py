"""A backend that holds a run inside the model until the test releases it, for races against a served adapter."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

from adapter.backends import BackendItem, ModelRequest, ScriptedBackend

BOUND = 60.0  # seconds a held run, or a test waiting for one, may wait on a loaded machine


class Gate:
    """Holds a run whose last message says "slow" inside the backend until released; the server has its own loop."""

    def __init__(self, backend: ScriptedBackend) -> None:
        self.backend = backend
        self.entered = threading.Event()
        self.release = threading.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        last = request.messages[-1] if request.messages else None
        if last is not None and "slow" in str(getattr(last, "content", "")):
            self.entered.set()
            await asyncio.to_thread(self.release.wait, BOUND)
        async for item in self.backend.stream(request):
            yield item
