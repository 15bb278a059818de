"""Paths with or without a trailing slash: the sub-app answers both, where Starlette would redirect.

Starlette answers `/agui/capabilities/` (or `/agui` for a sub-app mounted at `/agui/`) with a
307 and an empty body. A POST's client often does not follow it (httpx by default, curl without
`-L`), and the AG-UI Dojo registers agents without the slash. So the sub-app rewrites a path to
the form one of its routes has (`OneSlashForm`), and `mount` matches the mount point itself,
which a plain `Mount` leaves to the parent app's redirect.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Receive, Scope, Send


def mount(path: str, app: ASGIApp, *, name: str | None = None) -> Mount:
    """A `Mount` that also serves its bare path: `mount("/agui", create_app(adapter))` answers `POST /agui`.

    Use it wherever Starlette's `Mount` goes: in `Starlette(routes=[...])`, or, under FastAPI,
    `app.routes.append(mount("/agui", create_app(adapter)))`. A plain `Mount` serves `/agui/` but
    leaves `/agui` to the parent app, which redirects it.
    """
    return _BareMount(path, app=app, name=name)


class _BareMount(Mount):
    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is Match.NONE and scope["type"] == "http" and self.path and get_route_path(scope) == self.path:
            # Matched as `path/`; the child keeps `path`, which the sub-app's OneSlashForm reads as `/`.
            return super().matches({**scope, "path": scope["path"] + "/"})
        return match, child_scope


class OneSlashForm:
    """ASGI middleware: a path no route matches is served as its other form (slash added or dropped) if that matches."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._matched(scope):
            other = _other_form(scope)
            if self._matched(other):
                scope = other
        await self.app(scope, receive, send)

    def _matched(self, scope: Scope) -> bool:
        return any(route.matches(scope)[0] is not Match.NONE for route in self.routes)


def get_route_path(scope: Scope) -> str:
    """The path below the mount point (`root_path`), as the routes see it; "" for the mount point itself."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _other_form(scope: Scope) -> Scope:
    path: str = scope["path"]
    route_path = get_route_path(scope)
    if route_path.endswith("/") and route_path != "/":
        return {**scope, "path": path.rstrip("/")}
    return {**scope, "path": path + "/"}
