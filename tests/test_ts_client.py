"""The official TypeScript client, `@ag-ui/client`, drives every demo scenario over real HTTP.

Each driver in tests/node/ runs the scenarios with one pinned client version and exits non-zero on a
failed scenario, a verification error the client throws, or any warning it writes; an `[ag-ui]` line
in its output fails the test too. `.ci/run` installs the packages (`npm ci` in each folder).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from externals import missing_node
from served_demo import serve_demo

pytestmark = pytest.mark.needs_node

NODE_DIR = Path(__file__).parent / "node"
TIMEOUT = 180  # seconds for one driver: 15 scenarios, each one or two runs


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], str]]:
    """The AG-UI endpoint of a demo served with the given `frontend_outcome`, one server per mode."""
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}

        def endpoint(mode: str) -> str:
            if mode not in urls:
                db = tmp_path_factory.mktemp(f"demo-{mode}") / "demo.db"
                urls[mode] = stack.enter_context(serve_demo(db, frontend_outcome=mode)) + "/agui/"
            return urls[mode]

        yield endpoint


def drive(package: str, url: str, mode: str, script: str = "drive.mjs") -> subprocess.CompletedProcess[str]:
    problem = missing_node()
    assert problem is None, problem
    node = shutil.which("node")
    assert node is not None
    command = [node, script, url, mode]
    return subprocess.run(command, cwd=NODE_DIR / package, capture_output=True, text=True, timeout=TIMEOUT, check=False)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("package", "mode"),
    [
        pytest.param("client-1.0", "interrupt", id="1.0-interrupt"),
        pytest.param("client-1.0", "pending", id="1.0-pending"),
        pytest.param("client-0.0.59", "pending", id="0.0.59-pending"),
        pytest.param("client-0.0.59", "interrupt", id="0.0.59-interrupt"),
    ],
)
def test_the_client_runs_every_demo_scenario(demo: Callable[[str], str], package: str, mode: str) -> None:
    result = drive(package, demo(mode), mode)

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"^client-\S+ \(\w+\): (\d+) of \1 scenarios passed$", result.stdout, re.MULTILINE), output
    assert "[ag-ui]" not in output, output
