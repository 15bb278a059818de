"""The official TypeScript client, `@ag-ui/client`, drives every demo scenario over real HTTP.

Each driver in tests/node/ runs the scenarios with one pinned client version and exits non-zero on a
failed scenario, a verification error the client throws, or any warning it writes; an `[ag-ui]` line
in its output fails the test too. `.ci/run` installs the packages (`npm ci` in each folder).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator

import pytest
from served_demo import serve_demo
from ts_clients import drive

pytestmark = pytest.mark.needs_node


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str, str], str]]:
    """The AG-UI endpoint of a demo served with the given `frontend_outcome` and `history`, one server each."""
    with contextlib.ExitStack() as stack:
        urls: dict[tuple[str, str], str] = {}

        def endpoint(mode: str, history: str = "client") -> str:
            if (mode, history) not in urls:
                db = tmp_path_factory.mktemp(f"demo-{mode}-{history}") / "demo.db"
                # "pending" is the default: those runs set no option, as a new user's app does not.
                options = {} if mode == "pending" else {"frontend_outcome": mode}
                served = serve_demo(db, history=history, **options)
                urls[mode, history] = stack.enter_context(served) + "/agui/"
            return urls[mode, history]

        yield endpoint


@pytest.mark.slow
@pytest.mark.parametrize(
    ("package", "mode", "history"),
    [
        pytest.param("client-1.0", "interrupt", "client", id="1.0-interrupt"),
        pytest.param("client-1.0", "pending", "client", id="1.0-pending"),
        pytest.param("client-0.0.59", "pending", "client", id="0.0.59-pending"),
        pytest.param("client-0.0.59", "interrupt", "client", id="0.0.59-interrupt"),
        # Adapter(history="server"): the client still sends everything, and once only its new message.
        pytest.param("client-1.0", "interrupt", "server", id="1.0-interrupt-server-history"),
        pytest.param("client-0.0.59", "pending", "server", id="0.0.59-pending-server-history"),
    ],
)
def test_the_client_runs_every_demo_scenario(
    demo: Callable[[str, str], str], package: str, mode: str, history: str
) -> None:
    result = drive(package, demo(mode, history), mode, history=history)

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"^client-\S+ \([^)]+\): (\d+) of \1 scenarios passed$", result.stdout, re.MULTILINE), output
    assert ("server history" in result.stdout) == (history == "server"), output
    assert "[ag-ui]" not in output, output
