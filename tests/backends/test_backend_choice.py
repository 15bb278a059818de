from __future__ import annotations

import pytest

from adapter.backends import AGUIUpstream, OpenAIChatBackend, ScriptedBackend
from examples import demo_agent
from examples.backend_choice import DEFAULT_MODEL, choose_backend, close_backend


@pytest.mark.parametrize(
    "environ",
    [
        pytest.param({}, id="nothing-set"),
        pytest.param({"AGUI_UPSTREAM_URL": "", "OPENAI_BASE_URL": ""}, id="empty-values"),
        pytest.param({"OPENAI_API_KEY": "sk-unused-0123456789", "OPENAI_MODEL": "m"}, id="key-without-url"),
    ],
)
async def test_the_scripted_agent_is_the_default(environ: dict[str, str]) -> None:
    backend = choose_backend(environ)

    assert backend is demo_agent.backend
    assert isinstance(backend, ScriptedBackend)
    await close_backend(backend)


async def test_the_caller_may_bring_its_own_scripted_agent() -> None:
    scripted = ScriptedBackend([])

    upstream = choose_backend({"AGUI_UPSTREAM_URL": "http://a.test/"}, scripted=scripted)

    assert choose_backend({}, scripted=scripted) is scripted
    assert isinstance(upstream, AGUIUpstream)
    await close_backend(upstream)


async def test_an_openai_base_url_picks_the_chat_completions_backend() -> None:
    backend = choose_backend({"OPENAI_BASE_URL": "http://localhost:11434/v1"})

    assert isinstance(backend, OpenAIChatBackend)
    assert backend.model == DEFAULT_MODEL == "gpt-4o-mini"
    assert repr(backend) == "OpenAIChatBackend(base_url='http://localhost:11434/v1', model='gpt-4o-mini')"
    assert "authorization" not in backend._headers
    await close_backend(backend)
    assert backend.client.is_closed


async def test_the_key_and_model_come_from_the_given_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-process-0123456789")
    environ = {"OPENAI_BASE_URL": "https://llm.test/v1", "OPENAI_API_KEY": "sk-given-0123456789", "OPENAI_MODEL": "m-7"}

    backend = choose_backend(environ)

    assert isinstance(backend, OpenAIChatBackend)
    assert backend.model == "m-7"
    assert backend._headers["authorization"] == "Bearer sk-given-0123456789"
    assert "sk-given" not in repr(backend)
    await close_backend(backend)


async def test_an_agui_upstream_url_wraps_that_agent_and_wins_over_openai() -> None:
    environ = {"AGUI_UPSTREAM_URL": "http://127.0.0.1:9000/agent", "OPENAI_BASE_URL": "https://api.openai.com/v1"}

    backend = choose_backend(environ)

    assert isinstance(backend, AGUIUpstream)
    assert repr(backend) == "AGUIUpstream(url='http://127.0.0.1:9000/agent')"
    await close_backend(backend)
    assert backend.client.is_closed
