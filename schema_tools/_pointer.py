"""JSON pointers (RFC 6901): escaping a reference token, and joining tokens into a pointer."""

from __future__ import annotations

from collections.abc import Iterable


def escape(token: str | int) -> str:
    """Escape one reference token for a JSON pointer (RFC 6901)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    """Undo `escape` for one reference token."""
    return token.replace("~1", "/").replace("~0", "~")


def pointer(path: Iterable[str | int]) -> str:
    """Join path segments into a JSON pointer; the empty path is ``""``."""
    return "".join("/" + escape(part) for part in path)
