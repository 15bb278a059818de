"""What checking anything against a schema from outside may cost: bounded by what the policy accepted.

The cost is counted in work units, never on a clock: the values of a schema once its references are
expanded (`unfolded_size`), and the steps a validation spends (`StepBudget`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from agui import frontend_tool, resolved
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema._utils import uniq
from schema_graphs import bomb, expanded, graphs, instances, values

from adapter.backends import ScriptedBackend
from adapter.conformance import create_reference_app
from adapter.conformance._cases_gate import _violating  # private on purpose: the kit's one check of a target's schema
from adapter.conformance._probe import Skip  # private on purpose: what that check raises for an unusable schema
from schema_tools import DEFAULT_POLICY, STRICT_TOOL_POLICY, SchemaPolicyError, check_schema
from schema_tools._expansion import unfolded_size  # private on purpose: the counter the policy bounds
from schema_tools._steps import StepBudget  # private on purpose: the meter every validation spends from
from schema_tools._validate import MAX_STEPS, checked, compiled  # private on purpose: a validation's steps

if TYPE_CHECKING:
    from conftest import MakeAdapter, Serve

ONE_SPEND = 1_000
"""The most one spend may pass a budget by: one schema object's weight (its keywords and their entries)."""


def counted(schema: Any) -> int:
    """Every JSON value of `schema` as written, the way `max_nodes` counts them."""
    return values(schema) - sum(values(key) for key in _keys(schema))


def _keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return list(value) + [key for item in value.values() for key in _keys(item)]
    if isinstance(value, list):
        return [key for item in value for key in _keys(item)]
    return []


@given(schema=graphs(), limit=st.integers(1, 3_000))
def test_the_unfolded_size_is_the_size_of_the_written_out_schema(schema: dict[str, Any], limit: int) -> None:
    unfolded = unfolded_size(schema, limit)

    assert unfolded.size == min(expanded(schema, schema, limit), limit + 1)
    assert (unfolded.where is None) == (unfolded.size <= limit)


@given(schema=graphs(cycles=True, max_levels=40), limit=st.integers(1, 10**9))
def test_counting_the_unfolded_size_is_linear_in_the_document(schema: dict[str, Any], limit: int) -> None:
    """Whatever it expands to, cycles included: each position and reference is visited a bounded number of times."""
    assert unfolded_size(schema, limit).work <= 6 * counted(schema)


@pytest.mark.parametrize("levels", [15, 60])
def test_the_strict_preset_refuses_the_doubling_graph(levels: int) -> None:
    with pytest.raises(SchemaPolicyError) as refused:
        check_schema(bomb(levels), policy=STRICT_TOOL_POLICY)

    assert [violation.rule for violation in refused.value.violations] == ["max-expansion"]


@given(schema=graphs(), instance=instances())
def test_a_validation_costs_at_most_the_unfolded_schema_per_value(schema: dict[str, Any], instance: Any) -> None:
    """Without recursion, each value is evaluated at most once against each schema of the written-out tree."""
    unfolded = unfolded_size(schema, 10**6).size
    compiled(schema)  # compiling is counted too, once per schema: here, the evaluation alone
    budget = StepBudget(10**9)

    issues = checked(instance, schema, budget)

    assert budget.used <= 4 * unfolded * (values(instance) + 1)
    assert (issues == []) == Draft202012Validator(schema).is_valid(instance)


@given(schema=graphs(cycles=True), instance=instances(), limit=st.integers(1, 5_000))
def test_a_validation_never_spends_more_than_its_budget(schema: dict[str, Any], instance: Any, limit: int) -> None:
    """Recursion included, where one value may be evaluated many times: the budget stops it, not the clock."""
    compiled(schema)  # compiling spends the meta-schema's steps: here, the evaluation alone
    budget = StepBudget(limit)
    try:
        issues = checked(instance, schema, budget)
    except SchemaPolicyError as refused:  # a loop that never descends into the instance
        assert {violation.rule for violation in refused.violations} == {"ref-loop"}
        return

    assert budget.used <= limit + 2 * counted(schema)  # the one spend that passes the limit: one schema's weight
    if budget.used > limit:
        assert [issue.keyword for issue in issues] == ["max-steps"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from([0.0, 1.0, 1.5]) | st.text(max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=10,
)


@given(items=st.lists(JSON, max_size=8))
def test_unique_items_agrees_with_jsonschema_and_is_linear(items: list[Any]) -> None:
    compiled({"uniqueItems": True})
    budget = StepBudget(10**9)

    issues = checked(items, {"uniqueItems": True}, budget)

    assert (issues == []) == uniq(items)
    assert budget.used <= 2 * values({"uniqueItems": True}) + 2 + values(items)


def test_distinct_objects_are_checked_for_uniqueness_in_linear_steps() -> None:
    """jsonschema compares unhashable items pairwise: 20 000 objects were 200 million comparisons."""
    items = [{"n": number} for number in range(20_000)]
    compiled({"uniqueItems": True})
    budget = StepBudget(10**9)

    assert checked(items, {"uniqueItems": True}, budget) == []
    assert budget.used <= 3 * values(items)


def navigate(result_schema: Any) -> dict[str, Any]:
    return {**frontend_tool("navigate", path={"type": "string"}), "metadata": {"resultSchema": result_schema}}


@pytest.mark.parametrize("levels", [15, 60])
@pytest.mark.parametrize("agent", ["adapter", "reference-agent"])
async def test_a_doubling_result_schema_is_refused_when_it_is_declared(
    serve: Serve, make_adapter: MakeAdapter, backend: ScriptedBackend, agent: str, levels: int
) -> None:
    """The issue's 1 KB graph: the strict preset used to accept it, and one resume then took 9 s."""
    app = make_adapter() if agent == "adapter" else create_reference_app()
    served = await serve(app)
    thread = served.client.thread(tools=[navigate(bomb(levels))])

    reply = await thread.say("go to settings")

    refusal = reply.refusal(422)
    assert refusal["code"] == "INVALID_TOOL_SCHEMA"
    assert [(d["schema"], d["rule"]) for d in refusal["details"]] == [
        ("/tools/0/metadata/resultSchema", "max-expansion")
    ]
    assert len(backend.requests) == 0


async def test_an_unchecked_doubling_schema_costs_a_resume_at_most_its_step_budget(
    serve: Serve, make_adapter: MakeAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the policy off, nothing refuses the graph up front: the validation's budget ends the check, refused."""
    budgets: list[StepBudget] = []
    start = StepBudget.__init__

    def kept(budget: StepBudget, limit: int) -> None:  # noted once per validation, not per step: cheap under load
        start(budget, limit)
        budgets.append(budget)

    monkeypatch.setattr(StepBudget, "__init__", kept)
    served = await serve(make_adapter(client_tool_policy=None, frontend_outcome="interrupt"))
    thread = served.client.thread(tools=[navigate(bomb(24))])
    (interrupt,) = (await thread.say("go to settings")).interrupts

    answered = await thread.resume(resolved(interrupt["id"], {"a": 1}))

    assert answered.error["code"] == "RESUME_PAYLOAD_INVALID"
    assert [d["keyword"] for d in answered.error["metadata"]["details"]] == ["max-steps"]
    assert budgets
    assert max(budget.used for budget in budgets) <= MAX_STEPS + ONE_SPEND


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        pytest.param(bomb(24), "costs more than", id="doubling-2^24"),
        pytest.param({"$ref": "#"}, "ref-loop", id="self-reference"),
    ],
)
def test_the_kit_skips_a_target_schema_it_cannot_evaluate_in_bounded_steps(
    schema: dict[str, Any], why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kit ran past 90 s on the 2^24 graph, and `{"$ref": "#"}` crashed it with a RecursionError."""
    budgets: list[StepBudget] = []
    start = StepBudget.__init__

    def kept(budget: StepBudget, limit: int) -> None:  # only the budgets this check makes, whatever else runs
        start(budget, limit)
        budgets.append(budget)

    monkeypatch.setattr(StepBudget, "__init__", kept)

    with pytest.raises(Skip, match=why):
        _violating(schema)

    assert budgets
    assert sum(budget.used for budget in budgets) <= 3 * (100_000 + ONE_SPEND)


@pytest.mark.parametrize("policy", [DEFAULT_POLICY, STRICT_TOOL_POLICY], ids=["default", "strict"])
@given(schema=graphs(cycles=True))
def test_every_policy_bounds_the_unfolded_size_of_what_it_accepts(policy: Any, schema: dict[str, Any]) -> None:
    schema = {"type": "object", **schema}
    try:
        check_schema(schema, policy=policy)
    except SchemaPolicyError:
        return

    assert unfolded_size(schema, policy.max_expansion).size <= policy.max_expansion
