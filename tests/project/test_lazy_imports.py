"""What an app keeps out of memory until it uses it: HTTP backends, telemetry, schemas, databases (issues 22, 43).

httpx comes with `OpenAIChatBackend`, `AGUIUpstream` and `UpstreamLimits`, imported on first use
from `adapter.backends`; the OpenTelemetry API comes once the app imports it; `jsonschema` (with `referencing`,
`rpds`, `attrs`) and `re2` come with the first schema checked or validated; `sqlite3` with `SQLiteStore`, and each
store's code with its store (`MemoryStore` too). The engine's modules a plain run never executes (the thread API,
reattaching, the followers' feed, the inspector; schemas from signatures, forms' values) are imported by their first
use. Each check runs in a fresh interpreter, since this test process has imported them all long before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parents[2]

DEFERRED = (
    "adapter._sessions._thread_api",
    "adapter._sessions._reattach",
    "adapter._sessions._feed",
    "adapter._edge._inspector",
    "schema_tools._signature",
    "schema_tools._forms",
)
"""The modules a plain run never imports: `adapter._lazy.on_first_use` stands for each until its first use."""

_EXECUTED = f"""
import sys
executed = lambda: sorted(name for name in {DEFERRED!r} if name in sys.modules)
"""
"""Code that names which of `DEFERRED` a child interpreter imported: `executed()`."""

_A_TURN = (
    _EXECUTED
    + """
import asyncio
from ag_ui.core import RunAgentInput, UserMessage
from adapter import Adapter, create_app
from adapter.backends import ScriptedBackend
from adapter.stores import SQLiteStore

async def turn():
    adapter = Adapter(ScriptedBackend([]), store=SQLiteStore(sys.argv[1]))
    create_app(adapter)
    body = RunAgentInput(thread_id="t", run_id="r", messages=[UserMessage(id="u", content="hi")],
                         tools=[], context=[], state={}, forwarded_props={})
    made = [event.type async for event in adapter.run(body)]
    await adapter.aclose()
    return made

made = asyncio.run(turn())
assert made[-1] == "RUN_FINISHED", made
lazy = {"httpx", "opentelemetry", "jsonschema", "referencing", "rpds", "attrs", "re2"}
print(sorted({name.split(".")[0] for name in sys.modules} & lazy), executed())
"""
)


def run(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args], cwd=_ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_turn_on_the_scripted_backend_imports_no_http_client_telemetry_schema_checker_or_deferred_module(
    tmp_path: Path,
) -> None:
    assert run(_A_TURN, str(tmp_path / "turns.db")) == "[] []"


def test_a_client_tool_brings_the_schema_checker_with_its_check(tmp_path: Path) -> None:
    with_a_tool = _A_TURN.replace(
        "tools=[]", 'tools=[Tool(name="go", description="", parameters={"type": "object", "properties": {}})]'
    ).replace("import RunAgentInput,", "import RunAgentInput, Tool,")
    assert run(with_a_tool, str(tmp_path / "turns.db")) == "['attrs', 'jsonschema', 're2', 'referencing', 'rpds'] []"


def test_the_checking_functions_are_importable_from_their_door_and_bring_jsonschema() -> None:
    code = (
        "import sys; import schema_tools as door; assert 'jsonschema' not in sys.modules;"
        "from schema_tools import assert_valid, avalidate, check_schema, validate;"
        "assert door.check_schema.__module__ == 'schema_tools._check';"
        "assert {'assert_valid', 'avalidate', 'validate'} <= set(dir(door));"
        "print(validate(1, {'type': 'string'})[0].pointer == '', 'jsonschema' in sys.modules, 're2' in sys.modules)"
    )
    assert run(code) == "True True True"


def test_the_http_backends_are_importable_from_their_door_and_bring_httpx() -> None:
    code = (
        "import sys; import adapter.backends as door; assert 'httpx' not in sys.modules;"
        "from adapter.backends import AGUIUpstream, OpenAIChatBackend, UpstreamLimits;"
        "assert door.OpenAIChatBackend.__module__ == 'adapter.backends._openai';"
        "assert {'AGUIUpstream', 'UpstreamLimits'} <= set(dir(door));"
        "print('httpx' in sys.modules)"
    )
    assert run(code) == "True"


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    code = "import adapter.backends as door\ntry:\n    door.Nope\nexcept AttributeError as e:\n    print(e)"
    assert run(code) == "module 'adapter.backends' has no attribute 'Nope'"


def test_telemetry_turns_on_once_the_app_imports_the_api() -> None:
    code = (
        "import sys; from adapter import _telemetry as t; t.opened.add(1);"
        "assert 'opentelemetry' not in sys.modules;"
        "import opentelemetry.trace; t.opened.add(1);"
        "span = t.start('agui.run', 't', 'r'); t.finish(span, 'ok');"
        "print(type(span).__name__ != '_NullSpan', bool(t._api))"
    )
    assert run(code) == "True True"


def test_the_stores_are_importable_from_their_doors_and_bring_only_their_own_code() -> None:
    code = (
        "import sys; import adapter, adapter.stores as door;"
        "names = ('sqlite3', 'adapter.stores._memory', 'adapter.stores._sqlite', 'adapter.stores._postgres');"
        "held = lambda: sorted(m for m in names if m in sys.modules);"
        "print(held());"
        "from adapter.stores import SQLiteStore; print(held());"
        "from adapter import PostgresStore; print(held());"
        "from adapter import MemoryStore; print(held());"
        "print(door.SQLiteStore is adapter.SQLiteStore, PostgresStore is door.PostgresStore,"
        " MemoryStore is door.MemoryStore,"
        " {'SQLiteStore', 'PostgresStore', 'MemoryStore'} <= set(dir(door)) & set(dir(adapter)))"
    )
    assert run(code).splitlines() == [
        "[]",
        "['adapter.stores._sqlite', 'sqlite3']",
        "['adapter.stores._postgres', 'adapter.stores._sqlite', 'sqlite3']",
        "['adapter.stores._memory', 'adapter.stores._postgres', 'adapter.stores._sqlite', 'sqlite3']",
        "True True True True",
    ]


def test_an_unknown_name_of_the_stores_door_or_the_app_authors_is_still_an_attribute_error() -> None:
    code = (
        "import adapter, adapter.stores\n"
        "for door in (adapter, adapter.stores):\n"
        "    try:\n        door.Nope\n    except AttributeError as e:\n        print(e)"
    )
    assert run(code).splitlines() == [
        "module 'adapter' has no attribute 'Nope'",
        "module 'adapter.stores' has no attribute 'Nope'",
    ]


def test_each_deferred_module_is_imported_by_its_first_use(tmp_path: Path) -> None:
    code = _EXECUTED + (
        "import asyncio\n"
        "from adapter import Adapter, tool\n"
        "from adapter.backends import ScriptedBackend\n"
        "from adapter.stores import SQLiteStore\n"
        "adapter = Adapter(ScriptedBackend([]), store=SQLiteStore(sys.argv[1]))\n"
        "print(executed())\n"
        "assert asyncio.run(adapter.thread('t')) is None\n"
        "print(executed())\n"
        "assert asyncio.run(adapter.run_events('t', 'r')) is None\n"
        "print(executed(), 'feeds' in vars(adapter))\n"
        "tool(lambda city: city)\n"
        "from schema_tools import coerce_form_values\n"
        "print(executed())\n"
        "from adapter._edge import _http\n"
        "try:\n    _http._inspector.inspector_routes()\nexcept ImportError:\n    pass\n"
        "print(executed())\n"
    )
    thread_api, reattach, feed, inspector = DEFERRED[:4]
    assert run(code, str(tmp_path / "turns.db")).splitlines() == [
        "[]",
        str([thread_api]),
        str(sorted([feed, reattach, thread_api])) + " True",
        str(sorted([feed, reattach, thread_api, *DEFERRED[4:]])),
        str(sorted(DEFERRED)),
    ]


def test_a_module_on_first_use_is_imported_by_its_first_read_and_put_in_its_stand_ins_place() -> None:
    code = (
        "import sys; from adapter import _adapter; from adapter._lazy import on_first_use\n"
        "name = 'adapter._sessions._reattach'\n"
        "print(name in sys.modules, repr(_adapter._reattach))\n"
        "print(callable(_adapter._reattach.open_events), _adapter._reattach is sys.modules[name])\n"
        "nope = on_first_use({}, 'adapter._nope')\n"
        "try:\n    nope.x\nexcept ModuleNotFoundError as e:\n    print(e.name)\n"
    )
    assert run(code).splitlines() == [
        "False <module 'adapter._sessions._reattach', imported on first use>",
        "True True",
        "adapter._nope",
    ]
