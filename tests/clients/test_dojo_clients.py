"""The Dojo's state features through the official TypeScript client, `@ag-ui/client`, over real HTTP.

The Dojo's pages run @ag-ui/client 0.0.58 under CopilotKit; 0.0.59 (the version CopilotKit pins) and
1.0 drive examples/dojo_features.py in pending mode, the model played from fixtures, and must apply
every state event the adapter sends: the predicted document, the recipe, the plan's steps.
`.ci/run` installs the packages (`npm ci` in each folder).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest
from dojo_model import Dojo, DojoModel
from dojo_state_fixtures import FIXTURES
from ts_clients import drive

if TYPE_CHECKING:
    from conftest import Serve

pytestmark = pytest.mark.needs_node


@pytest.fixture
async def dojo_url(serve: Serve) -> AsyncIterator[str]:
    """The root of the Dojo app, served over real HTTP with no option set: pending, which its pre-1.0 client needs."""
    dojo = Dojo(serve, DojoModel(FIXTURES))
    client = await dojo.connect("")
    yield client.base_url.rstrip("/")
    await dojo.aclose()


@pytest.mark.slow
@pytest.mark.parametrize("package", ["client-0.0.59", "client-1.0"])
async def test_the_client_applies_every_state_event_of_the_dojo_features(dojo_url: str, package: str) -> None:
    result = await asyncio.to_thread(drive, package, dojo_url, "pending", "drive-dojo.mjs")

    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert re.search(r"^client-\S+: (\d+) of \1 scenarios passed$", result.stdout, re.MULTILINE), output
    assert "[ag-ui]" not in output, output
