r"""Checks for ``pattern`` regexes: they compile with Python ``re`` and avoid catastrophic backtracking.

The backtracking check is a heuristic over the parsed regex (``re._parser``). A repeat that may run more
than once (``*``, ``+``, ``{2,}``, ``{10}`` ...) is flagged when its body is *ambiguous*:

- it contains a variable-length repeat (``(a+)+``, ``(a*)*``, ``(.*a){10}``, ``(\w+\s?)*``), unless the
  body also has a mandatory single character that none of those inner repeats can match, which splits
  the iterations unambiguously (``([a-z0-9-]+\.)+`` and ``[a-z]+(-[a-z]+)*`` pass);
- or it contains alternatives that can start with the same character, or more than one that can match
  the empty string. Python's parser merges common prefixes (``(a|a)`` becomes ``a(|)``), and browsers'
  regex engines do not, so the *source* is also checked: a repeated group whose alternatives are equal
  or prefixes of one another is flagged (``(a|a)*``, ``(x|y|x)*``, ``(\d|\d\d)+``, also ``(a|ab)+``).

Possessive repeats and atomic groups are trusted. Polynomial cases such as ``a*a*a*b`` are not flagged.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from typing import Any

from schema_tools._re2 import regex_error

__all__ = ["pattern_problem"]

_parser: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

_REPEATS = frozenset({_c.MAX_REPEAT, _c.MIN_REPEAT})
_SAMPLE = [chr(code) for code in range(128)] + ["\u00a0", "\u00e9", "\u3000", "\u4e2d", "\U0001f600"]
_ALL = frozenset(_SAMPLE)
_CATEGORIES: dict[Any, Callable[[str], bool]] = {
    _c.CATEGORY_DIGIT: str.isdigit,
    _c.CATEGORY_WORD: lambda ch: ch.isalnum() or ch == "_",
    _c.CATEGORY_SPACE: str.isspace,
}


def _anything(_: str) -> bool:
    return True


_NEGATED = {
    _c.CATEGORY_NOT_DIGIT: _c.CATEGORY_DIGIT,
    _c.CATEGORY_NOT_WORD: _c.CATEGORY_WORD,
    _c.CATEGORY_NOT_SPACE: _c.CATEGORY_SPACE,
}


def pattern_problem(pattern: str) -> tuple[str, str] | None:
    """Return ``(rule, message)`` when `pattern` is refused, else ``None``.

    Rules: ``"pattern-invalid"`` (does not compile with Python ``re`` or with RE2, which `validate` matches
    with) and ``"pattern-redos"`` (see the module docstring: `validate` itself cannot backtrack, but a front
    end may apply the same pattern with a backtracking engine).
    """
    unsupported = regex_error(pattern)
    if unsupported is not None:
        return "pattern-invalid", unsupported
    try:
        re.compile(pattern)
        tree = _parser.parse(pattern)
    except (re.error, OverflowError, RecursionError, ValueError) as exc:
        return "pattern-invalid", f"does not compile: {exc}"
    if _risky(list(tree)) or _alternatives_overlap(pattern):
        return "pattern-redos", "nested or ambiguous repetition can backtrack catastrophically"
    return None


def _risky(items: list[Any]) -> bool:
    for op, av in items:
        if op in _REPEATS and av[1] > 1 and _ambiguous(list(av[2])):
            return True
        if any(_risky(list(child)) for child in _children(op, av)):
            return True
    return False


def _children(op: Any, av: Any) -> Iterator[Any]:
    if op in _REPEATS:
        yield av[2]
    elif op is _c.SUBPATTERN:
        yield av[3]
    elif op is _c.BRANCH:
        yield from av[1]
    elif op in (_c.ASSERT, _c.ASSERT_NOT):
        yield av[1]
    elif op is _c.GROUPREF_EXISTS:
        yield from (branch for branch in av[1:] if branch is not None)


def _ambiguous(body: list[Any]) -> bool:
    if any(_overlapping_branch(op, av) for op, av in _descendants(body)):
        return True
    inner = [_chars([(op, av)]) for op, av in _descendants(body) if _variable(op, av)]
    if not inner:
        return False
    loose = frozenset().union(*inner)
    return not any(not (_single(op, av) & loose) for op, av in _mandatory(body) if _single(op, av))


def _descendants(items: list[Any]) -> Iterator[tuple[Any, Any]]:
    for op, av in items:
        yield op, av
        for child in _children(op, av):
            yield from _descendants(list(child))


def _mandatory(items: list[Any]) -> Iterator[tuple[Any, Any]]:
    """The elements every match of `items` passes through, looking into plain groups."""
    for op, av in items:
        if op is _c.SUBPATTERN:
            yield from _mandatory(list(av[3]))
        else:
            yield op, av


def _variable(op: Any, av: Any) -> bool:
    if op in _REPEATS:
        return bool(av[0] != av[1])
    return op is _c.BRANCH and any(not alternative for alternative in av[1])


def _overlapping_branch(op: Any, av: Any) -> bool:
    if op is not _c.BRANCH:
        return False
    if sum(1 for alternative in av[1] if not alternative) > 1:
        return True
    seen: set[str] = set()
    for alternative in av[1]:
        first = _first(list(alternative))
        if seen & first:
            return True
        seen |= first
    return False


def _first(items: list[Any]) -> frozenset[str]:
    chars: frozenset[str] = frozenset()
    for op, av in items:
        if op is _c.SUBPATTERN:
            head = _first(list(av[3]))
        elif op in _REPEATS:
            head = _first(list(av[2]))
        elif op is _c.AT:
            continue
        else:
            head = _single(op, av) or _chars([(op, av)])
        chars |= head
        if not (op in _REPEATS and av[0] == 0):
            return chars
    return chars


def _chars(items: list[Any]) -> frozenset[str]:
    """Every sample character some part of `items` can match."""
    found: frozenset[str] = frozenset()
    for op, av in _descendants(items):
        found |= _single(op, av)
        if op in (_c.GROUPREF, _c.GROUPREF_EXISTS):
            return _ALL
    return found


def _single(op: Any, av: Any) -> frozenset[str]:
    """The sample characters a one-character element matches; empty for other elements."""
    if op is _c.LITERAL:
        return frozenset({chr(av)})
    if op is _c.NOT_LITERAL:
        return _ALL - {chr(av)}
    if op is _c.ANY:
        return _ALL - {"\n"}
    if op is _c.IN:
        return frozenset(ch for ch in _SAMPLE if _in_class(av, ch))
    return frozenset()


def _in_class(items: list[Any], ch: str) -> bool:
    negate = bool(items) and items[0][0] is _c.NEGATE
    hit = any(_class_item(op, av, ch) for op, av in items[1 if negate else 0 :])
    return hit != negate


def _class_item(op: Any, av: Any, ch: str) -> bool:
    if op is _c.LITERAL:
        return ch == chr(av)
    if op is _c.RANGE:
        return bool(av[0] <= ord(ch) <= av[1])
    if op is _c.CATEGORY:
        if av in _NEGATED:
            return not _CATEGORIES[_NEGATED[av]](ch)
        return _CATEGORIES.get(av, _anything)(ch)
    return True


_GROUP_PREFIX = re.compile(r"\?(?::|P?<[A-Za-z_]\w*>)")
_COUNTED = re.compile(r"\{(\d*)(,?)(\d*)\}")


def _alternatives_overlap(pattern: str) -> bool:
    """Whether a repeated group in the source has alternatives that are equal or prefixes of each other."""
    starts: list[int] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 1
        elif char == "[":
            index = _class_end(pattern, index)
        elif char == "(":
            starts.append(index)
        elif char == ")" and starts:
            start = starts.pop()
            if _repeated(pattern, index + 1) and _prefixed(_alternatives(pattern[start + 1 : index])):
                return True
        index += 1
    return False


def _class_end(pattern: str, index: int) -> int:
    index += 2 if pattern[index + 1 : index + 2] == "^" else 1
    index += 1 if pattern[index : index + 1] == "]" else 0
    while index < len(pattern) and pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index


def _repeated(pattern: str, index: int) -> bool:
    if pattern[index : index + 1] in ("*", "+"):
        return True
    counted = _COUNTED.match(pattern, index)
    if counted is None:
        return False
    low, comma, high = counted.groups()
    return bool(comma and not high) or int(high or low or 0) > 1


def _alternatives(group: str) -> list[str]:
    prefix = _GROUP_PREFIX.match(group)
    body = group[prefix.end() :] if prefix else group
    parts, depth, start, index = [], 0, 0, 0
    while index < len(body):
        char = body[index]
        if char == "\\":
            index += 1
        elif char == "[":
            index = _class_end(body, index)
        elif char in "()":
            depth += 1 if char == "(" else -1
        elif char == "|" and depth == 0:
            parts.append(body[start:index])
            start = index + 1
        index += 1
    return [*parts, body[start:]]


def _prefixed(alternatives: list[str]) -> bool:
    return any(
        other.startswith(alternative)
        for i, alternative in enumerate(alternatives)
        for j, other in enumerate(alternatives)
        if i != j
    )
