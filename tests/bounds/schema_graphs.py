"""Schema graphs for the bound tests: `$defs` whose levels name later levels (or earlier ones, for cycles)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

APPLICATORS = ["allOf", "anyOf", "oneOf", "not", "properties", "items", "if"]
"""How a level applies the levels it names: in place (the first four, and `if`) or one level into the instance."""
LEAVES = [{"type": "integer"}, {"type": "object"}, {}, {"minimum": 0}, {"required": ["a"]}, True, False]


def level(kind: str, targets: list[int]) -> dict[str, Any]:
    """One level of a graph: `kind` applied to a `$ref` to each of `targets`."""
    refs: list[dict[str, Any]] = [{"$ref": f"#/$defs/n{target}"} for target in targets]
    if kind in ("allOf", "anyOf", "oneOf"):
        return {kind: refs}
    if kind == "properties":
        return {"properties": {f"p{number}": ref for number, ref in enumerate(refs)}}
    if kind == "items":
        return {"items": refs[0], "prefixItems": refs[1:]} if len(refs) > 1 else {"items": refs[0]}
    if kind == "if":
        return {"if": refs[0], "then": refs[-1], "else": refs[0]}
    return {"not": refs[0]}


def bomb(levels: int) -> dict[str, Any]:
    """The 1 KB graph of the issue: each level is `allOf: [next, next]`, 2^levels schemas once expanded."""
    defs: dict[str, Any] = {f"n{i}": level("allOf", [i + 1, i + 1]) for i in range(levels)}
    defs[f"n{levels}"] = {"type": "object"}
    return {"type": "object", "$ref": "#/$defs/n0", "$defs": defs}


@st.composite
def graphs(draw: st.DrawFn, *, cycles: bool = False, max_levels: int = 9) -> dict[str, Any]:
    """A schema whose `$defs` levels each apply 1 to 3 others; with `cycles`, a level may name any level."""
    levels = draw(st.integers(1, max_levels))
    defs: dict[str, Any] = {}
    for number in range(levels):
        low = 0 if cycles else number + 1
        targets = draw(st.lists(st.integers(low, levels), min_size=1, max_size=3))
        defs[f"n{number}"] = level(draw(st.sampled_from(APPLICATORS)), targets)
    defs[f"n{levels}"] = draw(st.sampled_from(LEAVES))
    return {"$defs": defs, "$ref": "#/$defs/n0"}


def instances(depth: int = 4) -> st.SearchStrategy[Any]:
    """JSON values shaped like the graphs' properties (`p0`, `p1`, `a`) and items."""
    scalars = st.none() | st.integers(-3, 3) | st.text(max_size=3)
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["p0", "p1", "p2", "a"]), inner, max_size=3)
        ),
        max_leaves=12,
    )


def values(value: Any) -> int:
    """The JSON values in `value`, object keys included (a key is what `propertyNames` evaluates)."""
    if isinstance(value, dict):
        return 1 + sum(1 + values(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(values(item) for item in value)
    return 1


def expanded(value: Any, root: dict[str, Any], cap: int) -> int:
    """The JSON values of `value` with every `$ref` written out in place, counted the slow way, up to `cap`."""
    if isinstance(value, list):
        return 1 + sum(expanded(item, root, cap) for item in value)
    if not isinstance(value, dict):
        return 1
    total = 1
    for key, item in value.items():
        total += expanded(item, root, cap)
        if key == "$ref" and isinstance(item, str):
            total += expanded(root["$defs"][item.removeprefix("#/$defs/")], root, cap)
        if total > cap:
            return total
    return total
