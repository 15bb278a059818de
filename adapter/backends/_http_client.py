"""What the HTTP backends share: their client's lifecycle (server-sent events are read by `adapter.client`)."""

from __future__ import annotations

from types import TracebackType
from typing import Final, Self

import httpx

from adapter._errors import ConfigurationError


def http_url(text: str, *, name: str, alternative: str = "") -> httpx.URL:
    """`text` as an absolute http(s) URL with a host, or a ConfigurationError naming the argument."""
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"{name} is not a valid URL") from exc
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(f"{name} must be an http:// or https:// URL{alternative}")
    return url


class UseDefault:
    """The type of `DEFAULT`: an argument that was not given, so the backend's default applies."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = UseDefault()
DEFAULT_TIMEOUT: Final = httpx.Timeout(120.0, connect=10.0)
"""For a client a backend owns: 10 s to connect, 120 s between two reads (a slow first token included)."""


class ClientOwner:
    """A backend's HTTP client: one it was given, left to its owner, or one it makes and closes."""

    _client: httpx.AsyncClient
    _owns_client: bool
    _timeout: float | httpx.Timeout | None | httpx._client.UseClientDefault

    def _use_client(
        self,
        client: httpx.AsyncClient | UseDefault,
        timeout: float | httpx.Timeout | None | UseDefault,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._owns_client = isinstance(client, UseDefault)
        if isinstance(client, UseDefault):
            owned_timeout = DEFAULT_TIMEOUT if isinstance(timeout, UseDefault) else timeout
            client = httpx.AsyncClient(transport=transport, timeout=owned_timeout)
        self._client = client
        self._timeout = httpx.USE_CLIENT_DEFAULT if isinstance(timeout, UseDefault) else timeout

    @property
    def client(self) -> httpx.AsyncClient:
        """The HTTP client requests go through: the injected one, or the one the backend owns."""
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if the backend made it; an injected client is left to its owner."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def media_type(response: httpx.Response) -> str:
    """The response's media type in lower case, without parameters; "" when it declares none."""
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";")[0].strip().lower()
