"""The house's shape, checked by what it was meant to buy rather than by size.

A size cap cut whole concepts into pieces (issue 28), so there is none. What is checked instead:
- no import circles among the private modules of `adapter` and `schema_tools`;
- no module inside a package imports the package's public door (the facade re-exports; it never serves);
- every private module opens with a docstring that names its one concept;
- docs/architecture.md's module tables name every engine module and the tests that test it (files that exist).

An import inside a function (a lazy import) counts like any other: a circle through one is still a circle.
"""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("adapter", "schema_tools")


def modules() -> list[Path]:
    """Every Python module of the packages, as a path relative to the checkout."""
    return sorted(path.relative_to(ROOT) for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def dotted(path: Path) -> str:
    """The module's import name: adapter/_run/_runner.py -> adapter._run._runner, a door -> its package."""
    parts = list(path.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> Iterator[str]:
    """The project modules `path` imports, at any depth of its code, by import name (relative imports resolved)."""
    package = dotted(path) if path.name == "__init__.py" else dotted(path).rpartition(".")[0]
    for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from adapter import _errors` imports a module; `from adapter import Adapter` imports from the door.
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        yield from (name for name in names if name.split(".")[0] in PACKAGES)


MODULES = frozenset(dotted(path) for path in modules())


def graph() -> dict[str, set[str]]:
    """Each project module's imports of other project modules (submodule names resolved to their module)."""
    known = {dotted(path): path for path in modules()}
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        edges[name] = {target for target in imported(path) if target in known and target != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The import circles among private modules (a package door imports its modules by design: left out)."""
    private = {name: {t for t in targets if "._" in t} for name, targets in edges.items() if "._" in name}
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(private.get(node, ())):
            if state.get(target) == 1:
                found.append([*stack[stack.index(target) :], target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(private):
        if node not in state:
            visit(node)
    return found


def test_no_private_module_is_part_of_an_import_circle() -> None:
    assert cycles(graph()) == []


def test_the_record_handle_asks_no_policy_and_knows_no_gate() -> None:
    """Issue 41: the handle reads and writes values; the run asks the policy and owns the gate's choice."""
    assert graph()["adapter._thread._handle"].isdisjoint({"adapter._run._access", "adapter._run._gate"})


def test_the_record_handle_keeps_no_cache() -> None:
    """Issue 41: the cache is one rule in the store wrapper the handle is given; the handle names none of its state."""
    tree = ast.parse((ROOT / "adapter" / "_thread" / "_handle.py").read_text(encoding="utf-8"))
    from_cache = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "adapter._thread._cache"
        for alias in node.names
    }
    assert from_cache == {"ParsedStore"}  # the wrapper it reads and writes through; never the kept threads


def test_the_circle_finder_finds_a_circle() -> None:
    edges = {"adapter._a": {"adapter._b"}, "adapter._b": {"adapter._c"}, "adapter._c": {"adapter._a"}}
    assert cycles(edges) == [["adapter._a", "adapter._b", "adapter._c", "adapter._a"]]


@pytest.mark.parametrize("path", [p for p in modules() if p.name != "__init__.py"], ids=lambda p: p.as_posix())
def test_no_module_imports_its_packages_public_door(path: Path) -> None:
    doors = {dotted(p) for p in modules() if p.name == "__init__.py"}
    own = {door for door in doors if dotted(path).startswith(door + ".")}
    assert not own & set(imported(path)), f"{path} imports its package's door: import the private module instead"


@pytest.mark.parametrize("path", [p for p in modules() if p.name.startswith("_") and p.name != "__init__.py"])
def test_every_private_module_names_its_concept(path: Path) -> None:
    docstring = ast.get_docstring(ast.parse((ROOT / path).read_text(encoding="utf-8")))
    assert docstring, f"{path} has no docstring: its first line names the one concept it holds"
    assert len(docstring.splitlines()[0]) >= 20, f"{path}: the docstring's first line should name the concept"


def module_rows() -> list[tuple[list[str], list[str]]]:
    """docs/architecture.md's module tables: each row's modules and the test files it says test them."""
    rows = []
    for line in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[2].startswith("`tests/"):
            rows.append((re.findall(r"`([^`]+\.py)`", cells[0]), re.findall(r"`(tests/[^`]+\.py)`", cells[2])))
    return rows


def test_the_architecture_table_names_every_private_module_and_where_it_is_tested() -> None:
    rows = module_rows()
    named = {module for modules, _ in rows for module in modules}
    engine = {
        path.relative_to(ROOT / "adapter").as_posix()
        for path in (ROOT / "adapter").rglob("_*.py")
        if path.name != "__init__.py" and path.relative_to(ROOT / "adapter").parts[0].startswith("_")
    }
    assert engine <= named, f"modules with no row in docs/architecture.md: {sorted(engine - named)}"
    cited = [test for _, tests in rows for test in tests]
    assert all(tests for _, tests in rows), "every row names the tests of its modules"
    assert [test for test in cited if not (ROOT / test).is_file()] == []


def test_tests_are_grouped_by_layer_and_import_helpers_from_the_same_folders_for_pytest_and_mypy() -> None:
    """No test module sits loose in tests/; pytest's `pythonpath` and mypy's `mypy_path` name the same folders."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pytest_paths = settings["tool"]["pytest"]["ini_options"]["pythonpath"]
    assert pytest_paths == settings["tool"]["mypy"]["mypy_path"]
    assert "--import-mode=importlib" in settings["tool"]["pytest"]["ini_options"]["addopts"]
    assert sorted(path.name for path in (ROOT / "tests").glob("test_*.py")) == []


EDGE = ("adapter/_edge/_http.py", "adapter/_edge/_sse.py", "adapter/_edge/_input.py")
"""The HTTP edge's modules: they serve an `Adapter`, typed, and probe nothing by name (issue 41)."""


@pytest.mark.parametrize("module", EDGE)
def test_the_edge_probes_no_attribute_by_name(module: str) -> None:
    tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
    probes = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("getattr", "hasattr")
        and any(isinstance(arg, ast.Constant) and isinstance(arg.value, str) for arg in node.args[1:2])
    ]

    assert probes == [], f"{module} probes an attribute by name at lines {probes}: call the Adapter's method"


WINGS = (
    "adapter._edge",
    "adapter._adapter",
    "adapter._sessions",
    "adapter._run",
    "adapter._state",
    "adapter._thread",
)
"""The engine's layers, top to bottom: a module imports its own wing, the wings below it, and the kit, never up."""
GROUND = ("adapter.backends", "adapter.client", "adapter.stores")
"""What the engine stands on: the backend seam, the AG-UI client (which an upstream backend speaks through) and the
stores. They import the kit and one another, nothing of the engine."""
CONSUMERS = ("adapter", "adapter.conformance")
"""The door and the conformance kit, which uses the engine from outside: nothing of the engine imports them."""


def layer(module: str) -> str:
    """The wing, seam or consumer a module of `adapter` belongs to; "kit" for the flat modules everything uses."""
    for name in (*WINGS, *GROUND, *CONSUMERS[1:]):
        if module == name or module.startswith(name + "."):
            return name
    return "adapter" if module == "adapter" else "kit"


def upward(edges: dict[str, set[str]]) -> list[str]:
    """Every import against the layers: up a wing, from the kit or the ground into the engine, or to a consumer."""
    rank = {name: index for index, name in enumerate(WINGS)}
    wrong = []
    for source, targets in edges.items():
        if not source.startswith("adapter"):
            continue
        here = layer(source)
        for target in sorted(t for t in targets if t.startswith("adapter")):
            there = layer(target)
            if here == there or there == "kit" or here in CONSUMERS:
                continue
            if here in rank and (there in GROUND or rank.get(there, -1) > rank[here]):
                continue
            if here in GROUND and there in GROUND:
                continue
            wrong.append(f"{source} -> {target}")
    return wrong


def test_imports_run_one_way_between_the_wings() -> None:
    assert upward(graph()) == []


def test_every_private_module_of_the_engine_lives_in_a_wing_or_the_kit() -> None:
    flat = sorted(path.stem for path in (ROOT / "adapter").glob("_*.py") if path.name != "__init__.py")
    assert flat == sorted([*KIT, "_adapter"]), "a new private module goes into the wing of its layer"


KIT = (
    "_alarms",
    "_collector",
    "_compat",
    "_errors",
    "_ids",
    "_jsonpatch",
    "_lazy",
    "_limits",
    "_telemetry",
    "_types",
    "_wire",
)
"""The small kit every layer uses, left flat beside the door; it imports nothing but itself."""


def test_the_direction_check_finds_an_import_up_a_wing() -> None:
    edges = {
        "adapter._thread._handle": {"adapter._run._gate", "adapter._errors"},
        "adapter._run._gate": {"adapter._thread._record"},
        "adapter._errors": {"adapter._run._runner"},
        "adapter.stores._sqlite": {"adapter._thread._record"},
    }
    assert upward(edges) == [
        "adapter._thread._handle -> adapter._run._gate",
        "adapter._errors -> adapter._run._runner",
        "adapter.stores._sqlite -> adapter._thread._record",
    ]
