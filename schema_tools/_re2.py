r"""Linear-time regular expressions: every regex a schema or a payload brings is run by RE2.

Python's `re` backtracks, so a hostile pattern such as ``^(a+)+$`` takes exponential time on a
35-character string and blocks whatever thread runs it. RE2 (the ``google-re2`` bindings) matches in
time linear in the text, bounds the memory a pattern may compile to, and refuses what it cannot match
that way (backreferences, lookaround). Its ``\d``, ``\w`` and ``\s`` are ASCII, as in ECMA-262
regexes without the ``u`` flag, which is what JSON Schema patterns are written in.

Compiled patterns are kept for reuse in `cache`, bounded in bytes as well as in entries: a pattern is
compiled within a memory budget that grows with its program (`budget`), RE2 keeps its program and the DFA
states its searches build within that budget, and the cache counts each pattern at its whole budget. So
the patterns an outsider sends hold at most `CACHE_BYTES`, however many there are.
"""

from __future__ import annotations

from typing import Any, Final

import re2

from schema_tools._lru import CostCache
from schema_tools._steps import spend

__all__ = ["CACHE_BYTES", "RegexUnsupported", "budget", "cache", "regex_error", "search"]

_MAX_MEM: Final = 8 << 20  # RE2's default budget, explicit: a larger program is refused, not built
_MIN_MEM: Final = 256 << 10
_MEM_PER_INSTRUCTION: Final = 1024
"""What a compiled pattern may hold (its program and the DFA states a search builds) per program instruction,
between `_MIN_MEM` and `_MAX_MEM`: RE2 keeps each pattern within the budget it was compiled with."""
CACHE_BYTES: Final = 64 << 20
"""The most the compiled patterns kept for reuse may hold, each counted at its whole RE2 budget."""
_CACHE_ENTRIES: Final = 1024
_BYTES_PER_STEP: Final = 8  # a search costs up to about half a microsecond per byte (a pattern with many DFA states)
_INSTRUCTIONS_PER_STEP: Final = 8  # compiling costs about 0.6 microseconds per program instruction


class RegexUnsupported(ValueError):
    """RE2 cannot compile the pattern (a syntax error, a backreference, lookaround, too large)."""


def _options(max_mem: int) -> Any:
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False  # a refused client pattern is an answer, not a log line
    return options


_FULL: Final = _options(_MAX_MEM)

cache: CostCache[str, Any] = CostCache(_CACHE_ENTRIES, CACHE_BYTES)
"""Compiled patterns by their text, each costing its RE2 budget (`budget`) plus its length."""


def budget(program_size: int) -> int:
    """The RE2 memory budget a pattern whose program has `program_size` instructions is compiled with."""
    return min(_MAX_MEM, max(_MIN_MEM, program_size * _MEM_PER_INSTRUCTION))


def _compile(encoded: bytes, options: Any) -> Any:
    """`re2.compile` without its module cache, which keeps the last 128 patterns at up to 8 MiB each (1 GiB)."""
    return re2._Regexp(encoded, options)


def _compiled(pattern: str) -> Any:
    found = cache.get(pattern)
    if found is not None:
        return found
    try:
        encoded = pattern.encode("utf-8")
        regex = _compile(encoded, _FULL)
        memory = budget(regex.programsize)
        spend(1 + regex.programsize // _INSTRUCTIONS_PER_STEP)
        if memory < _MAX_MEM:  # compiled again within its own budget, so that its DFA stays as small as it is counted
            regex = _compile(encoded, _options(memory))
    except (re2.error, UnicodeEncodeError) as exc:
        raise RegexUnsupported(_reason(exc)) from None
    cache.put(pattern, regex, memory + len(encoded))
    return regex


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
    encoded = text.encode("utf-8", "surrogatepass")
    regex = _compiled(pattern)
    spend(1 + len(encoded) // _BYTES_PER_STEP)
    return regex.search(encoded) is not None
