"""The optional dev UI: the agui-inspector page, served by the AG-UI sub-app and pointed at it."""

from __future__ import annotations

from typing import Any, Final

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

INSPECTOR_PATH: Final = "/inspector"
"""Where the page lives, relative to the sub-app's mount point: `/agui` gives `/agui/inspector/`."""


def inspector_routes() -> list[BaseRoute]:
    """Routes that serve the agui-inspector page at `INSPECTOR_PATH`, with the sub-app as its one agent.

    The page has no authentication of its own: it is a development tool.

    Raises:
        ImportError: The optional dependency is not installed.
    """
    try:
        import agui_inspector
    except ImportError as exc:
        raise ImportError(
            "create_app(..., inspector=True) needs the agui-inspector package: pip install 'agui-adapter[inspector]'"
        ) from exc
    pages = _Pages(agui_inspector)
    return [Route(INSPECTOR_PATH, pages), Route(f"{INSPECTOR_PATH}/{{asset:path}}", pages)]


class _Pages:
    """An ASGI app: the inspector built by `agui_inspector.mount_inspector`, once per mount point.

    The page resolves an agent URL against its origin, not against its own path, so the URL has to
    carry the sub-app's mount point, which only a request tells (`root_path`).
    """

    def __init__(self, package: Any) -> None:
        self.package = package
        self.pages: dict[str, Starlette] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        root = str(scope.get("root_path", "")).rstrip("/")
        page = self.pages.get(root)
        if page is None:
            page = self.pages[root] = Starlette()
            agent = self.package.Agent(id="agui-adapter", url=f"{root}/", name="agui-adapter")
            self.package.mount_inspector(page, agents=[agent], enabled=True, path=INSPECTOR_PATH)
        await page(scope, receive, send)
