"""The docs' examples run as written (or are named fragments), and every relative link leads to a file and a section."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from replica_process import free_port
from served_demo import serve_agui_demo

from adapter.client import parse_sse

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "schema_tools" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def section(heading: str) -> str:
    """The README's text under `## heading`, up to the next `## `."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def first_block(text: str, language: str) -> str:
    found = re.search(rf"```{language}\n(.*?)```", text, re.S)
    assert found, f"no {language} block"
    return found[1]


def events(body: str) -> list[dict[str, object]]:
    """The events of SSE output; each line read as a frame, since a shell's `$(...)` strips a body's last blank line."""
    return list(parse_sse("".join(f"{line}\n\n" for line in body.splitlines()).encode()).events)


def text_of(evts: list[dict[str, object]]) -> str:
    return "".join(str(e["delta"]) for e in evts if e["type"] == "TEXT_MESSAGE_CONTENT")


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def run_script(script: str, url: str) -> list[dict[str, object]]:
    """Run a README shell block against `url` instead of the port it names; the events it printed."""
    script = re.sub(r"localhost:\d+", url.removeprefix("http://"), script)
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return events(run.stdout)


@pytest.mark.slow
def test_the_readme_mount_example_answers_a_question_and_a_resume_as_written(tmp_path: Path) -> None:
    missing = [tool for tool in ("curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the README's curl example needs {missing}: apt-get install -y curl jq (bash .ci/run does it)"
    (tmp_path / "app.py").write_text(first_block(section("Mount it in your app"), "python"), encoding="utf-8")
    command = re.search(r"run `(uvicorn app:app --port \d+)`", section("Mount it in your app"))
    assert command, "the README says how to serve app.py"
    ask, refund = blocks(section("Mount it in your app"), "sh")
    port = free_port()
    uvicorn = [str(Path(sys.executable).with_name("uvicorn")), *command[1].split()[1:-1], str(port)]

    with served(uvicorn, tmp_path, f"http://127.0.0.1:{port}/agui/health"):  # as the README says, on a free port
        asked = run_script(ask, f"http://127.0.0.1:{port}")
        refunded = run_script(refund, f"http://127.0.0.1:{port}")

    assert [e["content"] for e in asked if e["type"] == "TOOL_CALL_RESULT"] == [
        '{"orderId": "A100", "status": "delivered"}'
    ]
    assert text_of(asked) == 'lookup_order: {"orderId": "A100", "status": "delivered"}'
    end_of_first = next(i for i, e in enumerate(refunded) if e["type"] == "RUN_FINISHED") + 1
    first, resumed = refunded[:end_of_first], refunded[end_of_first:]
    assert first[-1]["outcome"]["type"] == "interrupt"  # type: ignore[index]
    assert text_of(resumed) == 'refund_order: {"orderId": "A100", "status": "refunded"}'
    assert resumed[-1]["outcome"] == {"type": "success"}
    assert (tmp_path / "turns.db").exists()


@pytest.mark.slow
def test_the_readme_curl_example_answers_the_call_it_was_given(tmp_path: Path) -> None:
    missing = [tool for tool in ("curl", "jq") if shutil.which(tool) is None]
    assert not missing, f"the README's curl example needs {missing}: apt-get install -y curl jq (bash .ci/run does it)"
    script = first_block(section("Try it with curl"), "sh")
    with serve_agui_demo(tmp_path / "demo.db") as url:  # `agui-demo`, as the README says to start it
        port = url.rsplit(":", 1)[1]
        run = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("localhost:8000", f"127.0.0.1:{port}")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert run.returncode == 0, run.stderr
    evts = events(run.stdout)
    end_of_first = next(i for i, e in enumerate(evts) if e["type"] == "RUN_FINISHED") + 1
    first, resumed = evts[:end_of_first], evts[end_of_first:]
    (call,) = [e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START" and e["toolCallName"] == "navigate"]
    assert first[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [call]}  # the demo's default
    assert text_of(resumed) == "I opened the settings page for you."
    assert resumed[-1]["type"] == "RUN_FINISHED"
    assert resumed[-1]["outcome"] == {"type": "success"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_run_a_shell_example_posts_declares_protocol_version_1_0(doc: Path) -> None:
    """A run input without `protocolVersion` is served as a client older than AG-UI 1.0 (no `pendingToolCallIds`):
    an example that a reader copies must get what the text around it promises."""
    for block in blocks(doc.read_text(encoding="utf-8"), "(?:sh|bash|console)"):
        runs = len(re.findall(r"\brunId\b", block))
        assert len(re.findall(r'\bprotocolVersion\b"?: "1\.0"', block)) == runs, block


def python_examples() -> dict[str, str]:
    """Every Python block of the docs, by `path#n` (its place among the page's Python blocks)."""
    return {
        f"{doc.relative_to(ROOT).as_posix()}#{n}": block
        for doc in DOCS
        for n, block in enumerate(blocks(doc.read_text(encoding="utf-8"), "python"))
    }


RUN_AS_WRITTEN_HERE = {
    "docs/conformance.md#0",
    "docs/conformance.md#2",
    "docs/forms.md#1",
    "docs/options.md#0",
    "docs/security.md#1",
    "docs/thread-api.md#0",
    "docs/tools.md#0",
    "docs/tools.md#1",
    "schema_tools/README.md#1",
}
"""Whole programs: they define what they show and import what they use, and run here as written."""
RUN_AGAINST_WHAT_THE_TEXT_STARTS = {
    "README.md#0": "test_the_readme_mount_example_answers_a_question_and_a_resume_as_written, served as the text says",
    "docs/client.md#0": "tests/clients/test_client.py, against what `agui-demo` serves",
    "docs/client.md#1": "tests/clients/test_session_client.py, against what `agui-demo` serves",
    "docs/replicas.md#1": "tests/sessions/test_lifespan_drain.py, its lifespan run as a server runs it",
    "docs/tools.md#2": "tests/approvals/test_approval_rules.py, the rule per call over a scripted model",
}
FRAGMENTS = {
    "docs/backends.md#0": "the Backend protocol's signature",
    "docs/backends.md#1": "a sketch around the reader's own model client (MyClient)",
    "docs/backends.md#2": "OpenAIChatBackend against a model server on the reader's machine",
    "docs/backends.md#3": "needs pydantic-ai's OpenAI provider and a key",
    "docs/backends.md#4": "a patch to LangGraph's agent, in a list item",
    "docs/client.md#2": "lines of a coroutine: `client` and `body` come from the text",
    "docs/clients.md#0": "two lines that change the reader's app",
    "docs/conformance.md#1": "top-level await against a running server",
    "docs/forms.md#0": "the reader's backend",
    "docs/forms.md#2": "top-level await in the reader's API endpoint",
    "docs/replicas.md#0": "the reader's backend and PostgreSQL server",
    "docs/security.md#0": "the reader's backend",
    "docs/stores.md#0": "the TurnStore protocol's signatures",
    "docs/stores.md#1": "the reader's backend",
    "docs/stores.md#2": "the reader's backend",
    "docs/thread-api.md#1": "top-level await on the reader's adapter",
    "docs/thread-api.md#2": "top-level await on the reader's adapter",
    "docs/thread-api.md#3": "a coroutine over the reader's adapter",
    "docs/tools.md#3": "the reader's backend",
    "schema_tools/README.md#0": "the reader's schemas and payloads",
}
"""Blocks that take names from the text around them, or need what this machine lacks: each says which."""


def test_every_python_example_is_run_or_named_a_fragment() -> None:
    """A new example is run as written (here, or by a test against what the text tells the reader to start), or
    listed as a fragment with what it takes from around it: no example is left untested unseen."""
    classified = RUN_AS_WRITTEN_HERE | RUN_AGAINST_WHAT_THE_TEXT_STARTS.keys() | FRAGMENTS.keys()
    assert sorted(python_examples()) == sorted(classified)


SHELL_RUN_AS_WRITTEN = {
    "README.md#1": "test_the_readme_mount_example_answers_a_question_and_a_resume_as_written",
    "README.md#2": "test_the_readme_mount_example_answers_a_question_and_a_resume_as_written",
    "README.md#3": "test_the_readme_curl_example_answers_the_call_it_was_given, against what `agui-demo` serves",
}
SHELL_COMMANDS = {
    "README.md#0": "installs; tests/project/test_wheel.py installs the wheel and runs agui-demo from another folder",
    "docs/backends.md#0": "the environment's agent: tests/backends/test_backend_choice.py",
    "docs/benchmarks.md#0": "a benchmark, not a test",
    "docs/clients.md#0": "the inspector page: tests/browser/test_inspector.py",
    "docs/clients.md#1": "the flag: tests/edge/test_serving_flags.py",
    "docs/clients.md#2": "the CopilotKit stack: tests/browser/copilotkitstack.py",
    "docs/conformance.md#0": "tests/conformance/test_conformance_check.py",
    "docs/conformance.md#1": "tests/conformance/test_conformance_reference.py",
    "docs/features.md#0": "a model server on the reader's machine; the agents: tests/clients/test_dojo_features.py",
    "docs/replicas.md#0": "the reader's app; replicas on one SQLite file: tests/invariants/",
    "docs/replicas.md#1": "installs",
    "docs/replicas.md#2": "installs, then a load benchmark, not a test",
    "docs/replicas.md#3": "tests/stores/test_purge_command.py",
    "docs/stores.md#0": "tests/stores/test_purge_command.py",
    "docs/testing.md#0": "CI itself",
}
"""Commands, not programs: each names the test that runs what it runs (with its own ports and paths), or why none."""


def test_every_shell_example_is_run_or_named_a_command() -> None:
    found = {
        f"{doc.relative_to(ROOT).as_posix()}#{n}"
        for doc in DOCS
        for n, _ in enumerate(blocks(doc.read_text(encoding="utf-8"), "(?:sh|bash|console)"))
    }
    assert sorted(found) == sorted(SHELL_RUN_AS_WRITTEN.keys() | SHELL_COMMANDS.keys())


@pytest.mark.parametrize("example", sorted(RUN_AS_WRITTEN_HERE))
def test_a_whole_python_example_runs_as_written(example: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a store it opens lands here
    code = python_examples()[example]

    exec(compile(code, example, "exec"), {"__name__": "docs_example"})


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # code is not a link
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:|#", target)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file(doc: Path) -> None:
    missing = [t for t in links(doc) if not (doc.parent / t.split("#", 1)[0]).exists()]
    assert not missing, f"{doc.relative_to(ROOT)} links to files that do not exist: {missing}"


def slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {slug(heading) for heading in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_to_a_section_finds_its_heading(doc: Path) -> None:
    text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
    targets = [t for t in LINK.findall(text) if "#" in t and not re.match(r"[a-z]+:", t)]
    broken = [
        target
        for target in targets
        if (page := (doc.parent / target.split("#", 1)[0]) if not target.startswith("#") else doc).suffix == ".md"
        and target.split("#", 1)[1] not in anchors(page)
    ]
    assert not broken, f"{doc.relative_to(ROOT)} links to sections that do not exist: {broken}"


def test_the_readme_stays_a_front_door() -> None:
    """What it is, how to start it, an app and its curl, the demo; the manual lives in docs/ (issue 45)."""
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_readme_links_every_docs_page() -> None:
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in links(README)}
    unlinked = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs pages the README never links: {unlinked}"


@contextlib.contextmanager
def served(command: list[str], cwd: Path, health: str) -> Iterator[None]:
    """Run a server `command` in `cwd` until `health` answers 200; stop it on leaving."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as server:
        try:
            deadline = time.monotonic() + 30
            while True:
                assert server.poll() is None, server.stderr.read().decode() if server.stderr else "it exited"
                try:
                    if httpx.get(health, timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline, f"{command} did not answer at {health}"
                time.sleep(0.05)
            yield
        finally:
            server.terminate()


@pytest.mark.slow
@pytest.mark.parametrize("example", ["examples.demo", "examples.meeting_room", "examples.support_ticket"])
def test_a_runnable_example_serves_on_the_port_it_is_given(example: str, tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", example, "--port", str(port)]
    if example == "examples.demo":
        command += ["--db", str(tmp_path / "demo.db")]  # not a demo.db in the checkout

    with served(command, ROOT, f"http://127.0.0.1:{port}/agui/health"):
        assert httpx.get(f"http://127.0.0.1:{port}/agui/health", timeout=10).json() == {"status": "ok"}


INSTALL = re.compile(r"pip install (?:-e )?'[^']*\[[^']*\]'")


def test_every_extra_is_installed_by_name_in_docs_and_messages() -> None:
    """One form for an extra everywhere: `pip install 'agui-adapter[NAME]'`; `-e` installs the checkout, once."""
    sources = [*DOCS, *ROOT.glob("adapter/**/*.py"), *ROOT.glob("examples/**/*.py"), ROOT / "tests" / "externals.py"]
    found = {
        (path.relative_to(ROOT).as_posix(), command)
        for path in sources
        if "node_modules" not in path.parts
        for command in INSTALL.findall(path.read_text(encoding="utf-8"))
    }
    odd = {(where, command) for where, command in found if not command.startswith("pip install 'agui-adapter[")}
    assert odd == {("README.md", "pip install -e '.[demo]'")}
