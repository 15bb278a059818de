"""Measure the conformance kit against each framework the tests wrap, alone and behind this adapter.

    python tests/compat/measure.py [--json PATH] [--only NAME ...]

prints one Markdown table per framework (docs/compatibility.md holds the last run's) and, with `--json`, every
report. Pydantic AI (also with `conversation_store=InMemoryConversationStore()`, its server-side record) and
LangGraph run in this process, each with a scripted model; the others run in virtualenvs
of their own (tests/upstreams/*-requirements.txt: Strands, Google ADK, CrewAI, LlamaIndex, Agno and Microsoft
Agent Framework) and are left out, with the reason, when theirs is missing.

Agno's and Microsoft Agent Framework's scripted models know one request, "refund 5 euros" (a `refund` tool that
needs approval), so they get it as the approval message, no parallel approval message, and the same client-tool
message as the others, which their models answer with text (the client-tool cases skip, and say so).

Every framework gets the exact channel, `GET /executions?thread=ID` -> `{"executions": N}`, so every "ran" /
"did not run" verdict is a count. In this process a middleware notes each run's thread and the gated tool counts
its real executions under it. Another process only counts in total (`GET /deleted`): the kit runs one case at a
time, and a case acts on one thread at a time, so the change in that total over a step is the thread's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TESTS = Path(__file__).parents[1]
sys.path[:0] = [str(TESTS.parent), str(TESTS)]

from adapter import Adapter, create_app  # noqa: E402
from adapter.backends import AGUIUpstream  # noqa: E402
from adapter.conformance import Report, check  # noqa: E402

KIT: dict[str, Any] = {
    "frontend_tool": "navigate",
    "frontend_message": "go to orders",
    "approval_message": "delete the draft",
    "parallel_approval_message": "delete both",
}
EXECUTIONS: str | None = "http://agui.invalid/executions"
THREAD: contextvars.ContextVar[str] = contextvars.ContextVar("thread", default="?")
OUT_OF_PROCESS = ("strands", "adk", "crewai", "llamaindex", "agno", "maf")
MESSAGES: dict[str, dict[str, Any]] = {
    "agno": {"approval_message": "refund 5 euros", "parallel_approval_message": None},
    "maf": {"approval_message": "refund 5 euros", "parallel_approval_message": None},
}
"""The messages a framework's scripted model knows, where they are not the kit's (KIT)."""
ROUTES = {"agno": "agui"}
"""A framework's AG-UI route under its server's URL, where it is not the root (its journal, `/deleted`, is)."""
PACKAGES = {
    "pydantic_ai": ["pydantic-ai-slim"],
    "langgraph": ["ag-ui-langgraph", "langgraph"],
    "strands": ["ag-ui-strands", "strands-agents"],
    "adk": ["ag-ui-adk", "google-adk"],
    "crewai": ["ag-ui-crewai", "crewai"],
    "llamaindex": ["llama-index-protocols-ag-ui"],
    "agno": ["agno", "ag-ui-protocol"],
    "maf": ["agent-framework-ag-ui", "agent-framework-core", "ag-ui-protocol"],
}


class Executions(list[str]):
    """The tool's record of what it did, counting each run under the thread of the request that made it."""

    def __init__(self) -> None:
        super().__init__()
        self.by_thread: Counter[str] = Counter()

    def append(self, item: str) -> None:
        self.by_thread[THREAD.get()] += 1
        super().append(item)


def counted(app: ASGIApp, executions: Executions) -> Starlette:
    """`app` with its runs' threads noted, and `GET /executions?thread=ID`."""

    async def noting(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        THREAD.set(str(json.loads(body or b"{}").get("threadId")))
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    async def hook(request: Request) -> Response:
        return JSONResponse({"executions": executions.by_thread[request.query_params["thread"]]})

    return Starlette(routes=[Route("/executions", hook), Mount("/", noting)])


def behind(app: ASGIApp | str) -> ASGIApp:
    """This adapter in front of a framework (in this process, or at a URL)."""
    return create_app(Adapter(AGUIUpstream(app)))


def with_hook(app: ASGIApp, upstream: Starlette) -> Starlette:
    """The adapter's app, answering `/executions` from the counting upstream's hook."""

    async def hook(request: Request) -> Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(upstream)) as client:
            answer = await client.get("http://upstream/executions", params=request.query_params)
        return JSONResponse(answer.json())

    return Starlette(routes=[Route("/executions", hook), Mount("/", app)])


@dataclass
class Measured:
    framework: str
    where: str
    report: Report


async def in_process(name: str, make: Callable[[Executions], ASGIApp], variant: str = "") -> list[Measured]:
    """The framework alone and behind the adapter; `variant` ("with a store, ") names a configuration of it."""
    measured = []
    for where in ("alone", "behind the adapter"):
        executions = Executions()
        upstream = counted(make(executions), executions)
        target = upstream if where == "alone" else with_hook(behind(upstream), upstream)
        report = await check(target, **KIT, executions_url=EXECUTIONS)
        measured.append(Measured(name, variant + where, report))
    return measured


def pydantic_ai(executions: Executions) -> ASGIApp:
    from upstreams.pydantic_agent import PydanticAgent

    return PydanticAgent(deleted=executions).app


def pydantic_ai_stored(executions: Executions) -> ASGIApp:
    """Pydantic AI keeping each conversation on the server: its store refuses answers to calls that are not pending."""
    from pydantic_ai.conversation_store import InMemoryConversationStore
    from upstreams.pydantic_agent import PydanticAgent

    return PydanticAgent(deleted=executions, conversation_store=InMemoryConversationStore()).app


def langgraph(executions: Executions) -> ASGIApp:
    from upstreams.langgraph_agent import LangGraphUpstream

    return LangGraphUpstream(deleted=executions).app


def remote(url: str, route: str = "") -> Starlette:
    """A framework served at `url` (its run route `route` under it), in front `GET /executions` from its total.

    See the module docstring for why the total is exact per thread.
    """

    async def forward(request: Request) -> Response:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        async with httpx.AsyncClient(timeout=120) as http:
            answer = await http.post(url + route, content=await request.body(), headers=headers)
        return Response(answer.content, answer.status_code, media_type=answer.headers.get("content-type"))

    async def hook(request: Request) -> Response:
        async with httpx.AsyncClient(timeout=30) as http:
            done = (await http.get(f"{url}deleted")).json()
        return JSONResponse({"executions": len(done)})

    return Starlette(routes=[Route("/executions", hook), Route("/", forward, methods=["POST"])])


async def out_of_process(name: str) -> list[Measured]:
    """A framework in its own process: a fresh server for each side (ADK caps its open executions at 10)."""
    measured = []
    for where in ("alone", "behind the adapter"):
        server = _start(name)
        try:
            upstream = remote(server.url, ROUTES.get(name, ""))
            target = upstream if where == "alone" else with_hook(behind(upstream), upstream)
            report = await check(target, **(KIT | MESSAGES.get(name, {})), executions_url=EXECUTIONS)
        finally:
            server.stop()
        measured.append(Measured(name, where, report))
    return measured


def _start(name: str) -> Any:
    try:
        from upstreams.kit import UpstreamServer
    except ImportError:  # before the upstream matrix had more than Strands
        from upstreams.kit import StrandsServer

        return StrandsServer.start()
    return UpstreamServer.start(name)


def missing(name: str) -> str | None:
    """Why a framework of its own virtualenv cannot be measured here; None when it can."""
    import externals

    if hasattr(externals, "missing_framework"):
        problem: str | None = externals.missing_framework(name)
        return problem
    return externals.missing_strands() if name == "strands" else "the upstream matrix does not have it yet"


def versions(name: str) -> str:
    """The framework's packages and their versions, read in the interpreter it runs in."""
    python = sys.executable
    if name in OUT_OF_PROCESS:
        import externals

        python = str(
            externals.framework_python(name) if hasattr(externals, "framework_python") else externals.strands_python()
        )
    found = []
    for package in PACKAGES[name]:
        code = f"import importlib.metadata as m; print(m.version({package!r}))"
        answer = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
        found.append(f"{package} {answer.stdout.strip() or '?'}")
    return ", ".join(found)


def cell(measured: Measured, case_id: str) -> str:
    """A case's status in the table, marked when the kit inferred it: without the hook, or from the events and the
    model's reply where the hook has nothing to count (the record cases: what a server kept as a call's answer)."""
    case = measured.report[case_id]
    return f"{case.status} (inferred)" if "inferred" in case.evidence else case.status


def table(measured: list[Measured]) -> str:
    cases = [case.id for case in measured[0].report.cases]
    head = "| case | " + " | ".join(f"{m.framework} {m.where}" for m in measured) + " |"
    rows = [head, "|---" * (len(measured) + 1) + "|"]
    for case_id in cases:
        rows.append(f"| `{case_id}` | " + " | ".join(cell(m, case_id) for m in measured) + " |")
    return "\n".join(rows)


async def measure(only: list[str]) -> list[Measured]:
    measured: list[Measured] = []
    makers = {"pydantic_ai": pydantic_ai, "langgraph": langgraph}
    for name, make in makers.items():
        if not only or name in only:
            measured += await in_process(name, make)
        if name == "pydantic_ai" and (not only or name in only):
            measured += await in_process(name, pydantic_ai_stored, "with a store, ")
    for name in OUT_OF_PROCESS:
        if only and name not in only:
            continue
        problem = missing(name)
        if problem is None:
            measured += await out_of_process(name)
        else:
            print(f"{name}: not measured ({problem})", file=sys.stderr)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--events-only", action="store_true", help="judge from the events, without the hook")
    args = parser.parse_args()
    if args.events_only:
        global EXECUTIONS
        EXECUTIONS = None
    warnings.simplefilter("ignore")
    measured = asyncio.run(measure(args.only))
    print(f"Measured {datetime.now(UTC):%Y-%m-%d} with Python {sys.version.split()[0]}\n")
    for name in dict.fromkeys(m.framework for m in measured):
        mine = [m for m in measured if m.framework == name]
        print(f"### {name} ({versions(name)})\n")
        print(table(mine) + "\n")
        for m in mine:
            for case in m.report.cases:
                if case.status in ("fail", "warn"):
                    print(f"- {m.where}, `{case.id}` {case.status}: {case.evidence}")
        print()
    if args.json:
        reports = [{"framework": m.framework, "where": m.where, **m.report.as_json()} for m in measured]
        Path(args.json).write_text(json.dumps(reports, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
