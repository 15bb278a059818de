"""Detect markup and script in schema text that a front end may render as labels."""

from __future__ import annotations

import html
import re
import unicodedata

__all__ = ["markup_problem"]

_TAG = re.compile(r"<(?:/?[a-z]|[!?])", re.IGNORECASE)  # what an HTML parser takes as the start of a tag
_EVENT_HANDLER = re.compile(
    r"\bon(?:abort|activate|animation\w*|auxclick|before\w*|begin|blur|cancel|can\w*|change|click|close|"
    r"context\w*|copy|cut|dblclick|drag\w*|drop|end|error|focus\w*|formdata|hashchange|input|invalid|key\w*|"
    r"load\w*|message\w*|mouse\w*|offline|online|page\w*|paste|pause|play\w*|pointer\w*|popstate|progress|"
    r"readystatechange|repeat|reset|resize|scroll\w*|search|select\w*|show|start|storage|submit|toggle|"
    r"touch\w*|transition\w*|unload|wheel)\s*=",
    re.IGNORECASE,
)
_SCHEME = re.compile(r"(?:java|vb|live)script:|data:(?:text/html|[^,;]*(?:svg|xml|javascript))", re.IGNORECASE)
_INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp"}


def markup_problem(text: str) -> str | None:
    """Say why `text` looks like HTML or script, or return ``None`` when it is plain text.

    Checked after decoding HTML entities (twice, for double encoding): anything an HTML parser reads as
    the start of a tag, comment or processing instruction (``<img``, ``</b``, ``<!--``, so also
    ``"a<b"``, while ``"a < b"`` and ``"x<3"`` pass), DOM event-handler attributes (``onerror=``), and
    ``javascript:``, ``vbscript:``, ``livescript:`` and scriptable ``data:`` URLs, with whitespace and
    control characters inside the scheme ignored.
    """
    decoded = html.unescape(html.unescape(text))
    if _TAG.search(decoded):
        return "contains an HTML tag"
    if _EVENT_HANDLER.search(decoded):
        return "contains an event-handler attribute"
    squeezed = "".join(ch for ch in decoded if unicodedata.category(ch) not in _INVISIBLE)
    if _SCHEME.search(squeezed):
        return "contains a script URL"
    return None
