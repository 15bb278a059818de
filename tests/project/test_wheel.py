"""The wheel as a user installs it: built, installed outside the checkout, its console scripts run from elsewhere.

.ci/wheel does it (and .ci/run runs it after the suite); this runs the same script, so that it is checked locally.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from externals import in_ci

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)  # .ci/wheel's own bound is 600 s: it fails first, with its output
def test_the_wheel_installs_outside_the_checkout_and_its_console_scripts_run() -> None:
    if importlib.util.find_spec("build") is None:
        missing = "the wheel test needs the build package: pip install --group dev (bash .ci/run does)"
        if in_ci():
            pytest.fail(missing, pytrace=False)
        pytest.skip(missing)
    env = {**os.environ, "PYTHON": sys.executable}

    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "wheel")], env=env, capture_output=True, text=True, timeout=600, check=False
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "usage: agui-conformance" in done.stdout
    assert "without the demo extra: Serving needs uvicorn: pip install 'agui-adapter[demo]'" in done.stdout
    assert 'agui-demo answered GET /agui/health: 200 {"status":"ok"}' in done.stdout
