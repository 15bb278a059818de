"""The ids a run input carries, listed two ways: with their pointers (`_id_sites`) and, per message of a long
history, without (`input_id_values`). The property: for any input the protocol's models accept, the two lists
hold the same values (the second lists the messages' own ids together), so the check at once and the walk for the
pointer judge the same ids.
"""

from __future__ import annotations

from ag_ui.core import RunAgentInput
from hypothesis import given, settings
from protocol_models import instances

# Private on purpose: the two listings of one rule, held equal here.
from adapter._limits import input_id_values, input_ids


@settings(max_examples=200)
@given(instances(RunAgentInput))
def test_the_ids_listed_without_pointers_are_the_ids_listed_with_them(run_input: RunAgentInput) -> None:
    assert sorted(input_id_values(run_input)) == sorted(value for _, value in input_ids(run_input))
