from __future__ import annotations

from ag_ui.core import UserMessage

from adapter import ModelRequest, ScriptedBackend, TextDelta
from adapter.backends import Rule


async def test_a_string_reply_names_the_patterns_groups() -> None:
    backend = ScriptedBackend([Rule(r"go to (\w+) and (?P<then>\w+)", reply="Opened {1}; now {then}. {2} {unknown}")])
    request = ModelRequest(messages=[UserMessage(id="u1", content="go to settings and wait")], tools=[])

    text = "".join([item.text async for item in backend.stream(request) if isinstance(item, TextDelta)])

    assert text == "Opened settings; now wait. wait {unknown}"
