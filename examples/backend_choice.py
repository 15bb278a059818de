"""Which agent the demo puts AG-UI in front of, chosen from the environment.

    nothing set                         the scripted demo agent: rules, offline, no key
    OPENAI_BASE_URL                     OpenAIChatBackend with the same tools; OPENAI_API_KEY (optional, empty
                                        for local servers) and OPENAI_MODEL (default "gpt-4o-mini")
    AGUI_UPSTREAM_URL                   AGUIUpstream: wrap an agent that already speaks AG-UI; it wins over
                                        OPENAI_BASE_URL, which many shells set for other tools

Every choice gets the same server tools, forms and store; only the agent behind them changes.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapter.backends import AGUIUpstream, Backend, OpenAIChatBackend

from . import demo_agent

DEFAULT_MODEL = "gpt-4o-mini"


def choose_backend(environ: Mapping[str, str], *, scripted: Backend | None = None) -> Backend:
    """The backend the environment asks for; empty values count as unset.

    `scripted` is the agent when neither URL is set; not given, the demo's `examples.demo_agent.backend`.
    """
    if upstream := environ.get("AGUI_UPSTREAM_URL"):
        return AGUIUpstream(upstream)
    if base_url := environ.get("OPENAI_BASE_URL"):
        model = environ.get("OPENAI_MODEL") or DEFAULT_MODEL
        return OpenAIChatBackend(base_url, model, api_key=environ.get("OPENAI_API_KEY", ""))
    return scripted if scripted is not None else demo_agent.backend


async def close_backend(backend: Backend) -> None:
    """Close the HTTP client a backend made, if it has one."""
    if isinstance(backend, AGUIUpstream | OpenAIChatBackend):
        await backend.aclose()
