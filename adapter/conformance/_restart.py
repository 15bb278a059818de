"""`--restart-cmd`: run a shell command that restarts the server, then wait until the endpoint answers again."""

from __future__ import annotations

import asyncio
import time

import httpx

from adapter.conformance._probe import Restart

_READY_TIMEOUT = 60.0  # seconds the restarted server may take to answer
_POLL = 0.2


def restart_command(command: str, url: str, *, ready_timeout: float = _READY_TIMEOUT) -> Restart:
    """A restart hook: run `command` to completion, then poll `url` until any HTTP answer comes back."""

    async def restart() -> None:
        process = await asyncio.create_subprocess_shell(command)
        if await process.wait() != 0:
            raise RuntimeError(f"{command!r} exited with {process.returncode}")
        await wait_until_serving(url, ready_timeout)

    return restart


async def wait_until_serving(url: str, timeout: float) -> None:
    """Return once `url` answers an HTTP request (any status); RuntimeError after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=5.0) as http:
        while True:
            try:
                async with http.stream("GET", url):
                    return  # the status line is the answer: the body, endless or not, is never read
            except httpx.TransportError as error:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{url} did not answer within {timeout:g}s after the restart") from error
            await asyncio.sleep(_POLL)
