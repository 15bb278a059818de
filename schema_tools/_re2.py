r"""Linear-time regular expressions: every regex a schema or a payload brings is run by RE2.

Python's `re` backtracks, so a hostile pattern such as ``^(a+)+$`` takes exponential time on a
35-character string and blocks whatever thread runs it. RE2 (the ``google-re2`` bindings) matches in
time linear in the text, bounds the memory a pattern may compile to, and refuses what it cannot match
that way (backreferences, lookaround). Its ``\d``, ``\w`` and ``\s`` are ASCII, as in ECMA-262
regexes without the ``u`` flag, which is what JSON Schema patterns are written in.
"""

from __future__ import annotations

import functools
from typing import Any, Final

import re2

__all__ = ["RegexUnsupported", "regex_error", "search"]

_MAX_MEM: Final = 8 << 20  # RE2's default budget, explicit: a larger program is refused, not built
_CACHE_SIZE: Final = 1024


class RegexUnsupported(ValueError):
    """RE2 cannot compile the pattern (a syntax error, a backreference, lookaround, too large)."""


def _options() -> Any:
    options = re2.Options()
    options.max_mem = _MAX_MEM
    options.log_errors = False  # a refused client pattern is an answer, not a log line
    return options


_OPTIONS: Final = _options()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compiled(pattern: str) -> Any:
    try:
        return re2.compile(pattern.encode("utf-8"), _OPTIONS)
    except (re2.error, UnicodeEncodeError) as exc:
        raise RegexUnsupported(_reason(exc)) from None


def _reason(exc: Exception) -> str:
    detail = exc.args[0] if exc.args else exc
    text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
    return f"RE2 cannot compile it: {text}"


def regex_error(pattern: str) -> str | None:
    """Say why RE2 refuses `pattern`, or return ``None`` when it compiles."""
    try:
        _compiled(pattern)
    except RegexUnsupported as exc:
        return str(exc)
    return None


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text` (JSON Schema's unanchored ``pattern`` semantics).

    Raises:
        RegexUnsupported: RE2 cannot compile `pattern`.
    """
    return _compiled(pattern).search(text.encode("utf-8", "surrogatepass")) is not None
