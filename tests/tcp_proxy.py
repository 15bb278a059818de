"""A TCP proxy the tests control, in front of a server such as PostgreSQL.

Cutting it is a server restart as a client sees it (live connections die, new ones are refused).
Freezing it is a network partition: connections stay open and new ones are accepted, but no byte goes
through either way until it thaws; then what was held goes on, as after a partition heals.
"""

from __future__ import annotations

import asyncio


class Proxy:
    """Forwards TCP connections to `host:port` until cut or frozen."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.open = True
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.held = 0
        """How many chunks wait for a thaw: a frozen proxy's proof that someone talked to it."""
        self.links: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port

    def drop(self) -> None:
        """Kill every live connection, as a restart does; new ones are let through."""
        for writer in list(self.links):
            writer.transport.abort()
        self.links.clear()

    def cut(self) -> None:
        """Kill every live connection and refuse new ones: the server is down."""
        self.open = False
        self.drop()

    def freeze(self) -> None:
        """Forward nothing more, either way, and kill nothing: a partition that drops no packet."""
        self.flowing.clear()

    def thaw(self) -> None:
        """Forward again, what was held first."""
        self.flowing.set()

    async def close(self) -> None:
        self.thaw()
        self.cut()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            writer.transport.abort()
            return
        self.links.add(writer)
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self.links.add(upstream_writer)
        await asyncio.gather(
            self._pump(reader, upstream_writer), self._pump(upstream_reader, writer), return_exceptions=True
        )

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                if not self.flowing.is_set():
                    self.held += 1
                    await self.flowing.wait()
                    self.held -= 1
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.transport.abort()
