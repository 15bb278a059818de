"""Every cache of outside material is bounded in bytes, not only in entries.

The bytes are counted as each cache counts them, and checked against what they stand for: a compiled
pattern counts the RE2 memory budget it was compiled with, which RE2 keeps it within.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import re2
from agui import frontend_tool, resolved
from hypothesis import given
from hypothesis import strategies as st

import schema_tools._re2 as regexes  # private on purpose: the compiled-pattern cache and its budgets
import schema_tools._validate as validation  # private on purpose: the compiled-validator cache
from adapter._run._tools import DEFAULT_BYTES, SchemaCache  # private on purpose: the client schema checks remembered
from schema_tools import DEFAULT_POLICY, STRICT_TOOL_POLICY, validate
from schema_tools._lru import CostCache  # private on purpose: the cache both caches are

if TYPE_CHECKING:
    from conftest import Connect


@contextmanager
def regex_cache(cache: CostCache[str, Any]) -> Iterator[CostCache[str, Any]]:
    """Compile patterns into `cache` instead of the process's."""
    kept, regexes.cache = regexes.cache, cache
    try:
        yield cache
    finally:
        regexes.cache = kept


PATTERNS = st.one_of(
    st.builds(
        lambda low, high, n: f"[^Q]{{{low},{low + high}}}Q{n}", st.integers(1, 60), st.integers(0, 60), st.integers()
    ),
    st.builds(lambda k, n: f"(a|b)*a(a|b){{{k}}}{n}", st.integers(1, 12), st.integers()),
    st.text(alphabet="abc.[]^$", max_size=8),
    st.from_regex(r"\A[a-z]{1,20}\Z"),
)


@given(patterns=st.lists(PATTERNS, max_size=30), entries=st.integers(1, 40), max_bytes=st.integers(1, 6 << 20))
def test_the_pattern_cache_holds_at_most_its_bytes(patterns: list[str], entries: int, max_bytes: int) -> None:
    with regex_cache(CostCache(entries, max_bytes)) as cache:
        for pattern in patterns:
            if regexes.regex_error(pattern) is None:
                regexes.search(pattern, "ab" * 50 + "Q")
            kept = cache.entries()
            assert cache.cost <= max_bytes
            assert len(kept) <= entries
            assert cache.cost == sum(regex.options.max_mem + len(key.encode()) for key, regex, _ in kept)
            assert all(regex.options.max_mem == regexes.budget(regex.programsize) for _, regex, _ in kept)


def live_regex_budgets() -> int:
    """The RE2 budgets of every compiled pattern this process still holds, wherever it is held."""
    return sum(found.options.max_mem for found in gc.get_objects() if isinstance(found, re2._Regexp))


def navigate(result_schema: Any) -> dict[str, Any]:
    return {**frontend_tool("navigate", path={"type": "string"}), "metadata": {"resultSchema": result_schema}}


async def test_fresh_patterns_from_anonymous_runs_leave_at_most_the_cache_budget(connect: Connect) -> None:
    """The issue's four run-and-resume pairs of fresh `[^Q]{500,1000}Q<n>` patterns left 2.5 GiB resident."""
    client = await connect(frontend_outcome="interrupt")
    for pair in range(4):
        patterns = {f"[^Q]{{500,1000}}Q{pair}x{n}": {"type": "string"} for n in range(30)}
        thread = client.thread(tools=[navigate({"type": "object", "patternProperties": patterns})])
        (interrupt,) = (await thread.say("go to settings")).interrupts
        answered = await thread.resume(resolved(interrupt["id"], {"q" * 600 + f"Q{pair}x{n}": "ok" for n in range(3)}))
        assert answered.outcome == {"type": "success"}

    assert live_regex_budgets() <= regexes.CACHE_BYTES + (8 << 20)  # and the one pattern being compiled


SCHEMAS = st.builds(
    lambda width, n: {"type": "object", "properties": {f"p{i}x{n}": {"type": "string"} for i in range(width)}},
    st.integers(0, 40),
    st.integers(),
)


@given(schemas=st.lists(SCHEMAS, max_size=8), max_bytes=st.integers(1, 50_000))
def test_the_validator_cache_holds_at_most_its_bytes(schemas: list[dict[str, Any]], max_bytes: int) -> None:
    kept, validation._CACHE = validation._CACHE, CostCache(512, max_bytes)
    try:
        for schema in schemas:
            validate({}, schema)
            assert validation._CACHE.cost <= max_bytes
            assert validation._CACHE.cost == sum(8 * len(key) for key, _, _ in validation._CACHE.entries())
    finally:
        validation._CACHE = kept


def noisy(n: int, width: int, name: int = 1) -> dict[str, Any]:
    """A schema with `width` markup violations, each reported with its pointer (`name` characters and more)."""
    return {"type": "object", "properties": {"p" * name + str(i): {"title": f"<b>{n}</b>"} for i in range(width)}}


@given(widths=st.lists(st.integers(0, 60), max_size=20), max_bytes=st.integers(1, 100_000), entries=st.integers(1, 8))
def test_the_client_schema_checks_remembered_hold_at_most_their_bytes(
    widths: list[int], max_bytes: int, entries: int
) -> None:
    cache = SchemaCache(entries, max_bytes)
    for n, width in enumerate(widths):
        found = cache.violations(noisy(n, width), STRICT_TOOL_POLICY)
        assert len(found) == width
        assert cache.bytes <= max_bytes
        assert len(cache) <= entries


def test_remembered_violations_of_many_noisy_schemas_stay_within_the_default_bytes() -> None:
    """A thousand-violation schema is not a digest: 4 096 of them were hundreds of megabytes."""
    cache = SchemaCache()
    for n in range(30):
        cache.violations(noisy(n, 100, name=2_000), DEFAULT_POLICY)

    remembered = sum(len(v.pointer) + len(v.message) for found in cache._found.values() for v in found)
    assert remembered <= DEFAULT_BYTES
