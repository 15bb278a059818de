"""What a new user meets first: each mistake gets a message that says what to do, at the line that made it."""

from __future__ import annotations

from typing import Any

import pytest

from adapter import Adapter, ConfigurationError, ScriptedBackend, tool


def lookup_order(order_id: str) -> str:
    """Find an order."""
    return order_id


OPENAI_STYLE = {"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    ("given", "says"),
    [
        pytest.param(lookup_order, "(lookup_order) is a plain function: decorate it with @tool", id="function"),
        pytest.param(OPENAI_STYLE, "is a dict, as OpenAI declares tools", id="openai-dict"),
        pytest.param("lookup_order", "is a str, not a tool", id="name"),
    ],
)
def test_a_tool_that_is_not_a_tool_is_refused_with_what_to_do(given: Any, says: str) -> None:
    with pytest.raises(ConfigurationError, match="tools\\[1\\]") as refused:
        Adapter(ScriptedBackend(), tools=[tool(lookup_order), given])

    assert says in str(refused.value)


def test_a_tool_without_a_docstring_warns_at_its_decorator() -> None:
    def undocumented(order_id: str) -> str:
        return order_id

    with pytest.warns(UserWarning, match="'undocumented' has no docstring or description") as warned:
        tool(undocumented)

    assert warned[0].filename == __file__


def test_an_untyped_parameter_warns_and_names_it() -> None:
    with pytest.warns(UserWarning, match=r"without a type annotation \('order_id', 'qty'\)") as warned:

        @tool(description="Reserve stock.")
        def reserve(order_id, qty, note: str = "") -> str:  # type: ignore[no-untyped-def]
            return str(order_id)

    assert warned[0].filename == __file__


def test_a_typed_documented_tool_warns_nothing(recwarn: pytest.WarningsRecorder) -> None:
    def note(text: Any) -> str:
        """Keep a note of any kind: `Any` is a type chosen, not one forgotten."""
        return str(text)

    tool(lookup_order)
    tool(note)

    assert [str(w.message) for w in recwarn] == []
