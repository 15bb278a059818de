from __future__ import annotations

from ag_ui.core import UserMessage

from adapter.backends import ModelRequest, Rule, ScriptedBackend, TextDelta


async def test_a_string_reply_names_the_patterns_groups() -> None:
    backend = ScriptedBackend([Rule(r"go to (\w+) and (?P<then>\w+)", reply="Opened {1}; now {then}. {2} {unknown}")])
    request = ModelRequest(messages=[UserMessage(id="u1", content="go to settings and wait")], tools=[])

    text = "".join([item.text async for item in backend.stream(request) if isinstance(item, TextDelta)])

    assert text == "Opened settings; now wait. wait {unknown}"


async def test_it_keeps_only_the_latest_requests() -> None:
    backend = ScriptedBackend(keep_requests=2)
    for text in ("one", "two", "three"):
        request = ModelRequest(messages=[UserMessage(id=text, content=text)], tools=[])
        _ = [item async for item in backend.stream(request)]

    assert [request.messages[0].id for request in backend.requests] == ["two", "three"]
    assert backend.requests[-1].messages[0].id == "three"


def test_a_long_running_server_keeps_a_bounded_number_by_default() -> None:
    assert ScriptedBackend().requests.maxlen == 1000
