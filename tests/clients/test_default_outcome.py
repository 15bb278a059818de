"""With no option set, a run that calls a client tool ends as AG-UI 1.0 says (FE-2): success, `pendingToolCallIds`.

The adapter's default is `frontend_outcome="pending"`, and the examples the official clients drive (the demo, the
Dojo features app) default to the adapter's own; so the tests that serve them with no option run the default:
`@ag-ui/client` 1.0.0 and 0.0.59 (tests/clients/test_ts_client.py, `pending` ids), the Dojo's state features
through both (tests/clients/test_dojo_clients.py), CopilotKit (tests/browser/test_copilotkit.py), and the kit
(tests/conformance/test_conformance_check.py, the adapter with two parallel approvals).
"""

from __future__ import annotations

import inspect

from agui import NAVIGATE, run_events, run_input, user

from adapter import Adapter
from adapter.backends import Call, Rule, ScriptedBackend
from examples import demo, dojo_features


def test_the_examples_default_to_the_adapter_s_frontend_outcome_which_is_pending() -> None:
    default = inspect.signature(Adapter).parameters["frontend_outcome"].default

    assert default == "pending"
    for build_app in (demo.build_app, dojo_features.build_app):
        assert inspect.signature(build_app).parameters["frontend_outcome"].default == default, build_app.__module__


async def test_a_client_tool_call_ends_the_run_with_success_and_its_pending_id_by_default() -> None:
    adapter = Adapter(ScriptedBackend([Rule(r"go to (\w+)", steps=[[Call("navigate", {"path": "/{1}"})]])]))

    events = await run_events(adapter, run_input("t1", [user("go to orders")], tools=[NAVIGATE]))

    (call,) = [event["toolCallId"] for event in events if event["type"] == "TOOL_CALL_START"]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [call]}
