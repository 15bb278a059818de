"""Runs a driver script of tests/node/ with one pinned `@ag-ui/client` (a folder there) against a served adapter.

tests/clients/test_ts_client.py drives every demo scenario through it, tests/clients/test_dojo_clients.py the
Dojo's state features. `.ci/run` installs the packages (`npm ci` in each folder).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from externals import missing_node

NODE_DIR = Path(__file__).parent / "node"
TIMEOUT = 180  # seconds for one driver: 15 scenarios, each one or two runs


def drive(
    package: str, url: str, mode: str, script: str = "drive.mjs", history: str = "client"
) -> subprocess.CompletedProcess[str]:
    """Run `script` in `tests/node/<package>` against `url` with the adapter's `frontend_outcome` and `history`."""
    problem = missing_node()
    assert problem is None, problem
    node = shutil.which("node")
    assert node is not None
    command = [node, script, url, mode, history]
    return subprocess.run(command, cwd=NODE_DIR / package, capture_output=True, text=True, timeout=TIMEOUT, check=False)
