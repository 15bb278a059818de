from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis.configuration import set_hypothesis_home_dir

# Hypothesis' cache lives outside the repository: pytest's `norecursedirs` replaces the default ignores,
# and a `.hypothesis` directory at the root would turn into a collection warning (an error here).
set_hypothesis_home_dir(str(Path(tempfile.gettempdir()) / "schema_tools-hypothesis"))
