"""A run's token usage: summed per provider and model over its steps, kept whole, and reported however it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from ag_ui.core import RunAgentInput
from agui import collect, run_input, user
from hypothesis import given
from hypothesis import strategies as st

from adapter import Adapter
from adapter._run._events import token_usage  # private on purpose: the accounting rule, over generated steps
from adapter.backends import BackendError, BackendItem, ModelRequest, TextDelta, Usage

COUNTS = ("reasoning_tokens", "cached_input_tokens", "cache_write_input_tokens")

counts = st.integers(min_value=0, max_value=10**6)
steps = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    provider=st.sampled_from([None, "openai", "vllm"]),
    model=st.sampled_from([None, "m1", "m2"]),
    reasoning_tokens=st.none() | counts,
    cached_input_tokens=st.none() | counts,
    cache_write_input_tokens=st.none() | counts,
)


@given(st.lists(steps, max_size=8))
def test_usage_is_summed_per_provider_and_model_and_nothing_is_invented(usage: list[Usage]) -> None:
    reported = token_usage(usage) or []

    groups = list(dict.fromkeys((u.provider, u.model) for u in usage))
    assert [(entry.provider, entry.model) for entry in reported] == groups
    for entry in reported:
        members = [u for u in usage if (u.provider, u.model) == (entry.provider, entry.model)]
        assert entry.input_tokens == sum(u.input_tokens for u in members)
        assert entry.output_tokens == sum(u.output_tokens for u in members)
        assert entry.total_tokens == entry.input_tokens + entry.output_tokens
        for count in COUNTS:
            known = [getattr(u, count) for u in members if getattr(u, count) is not None]
            assert getattr(entry, count) == (sum(known) if known else None)  # never reported: unset, not zero


class SpendsThenFails:
    """Two model steps' worth of usage, then a failure."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[BackendItem]:
        yield TextDelta("thinking")
        yield Usage(12, 3, provider="openai", model="m1", reasoning_tokens=2, cached_input_tokens=8)
        raise BackendError("the model server went away")


async def test_a_failed_run_still_reports_what_it_spent() -> None:
    adapter = Adapter(SpendsThenFails())

    events: list[dict[str, Any]] = await collect(
        adapter.run(RunAgentInput.model_validate(run_input("t", [user("hi")])))
    )

    error = events[-1]
    assert (error["type"], error["code"]) == ("RUN_ERROR", "BACKEND_ERROR")
    assert error["usage"] == [
        {
            "provider": "openai",
            "model": "m1",
            "inputTokens": 12,
            "outputTokens": 3,
            "totalTokens": 15,
            "reasoningTokens": 2,
            "cachedInputTokens": 8,
        }
    ]
