"""The conformance kit: black-box checks of any AG-UI server's interrupt contract, and a reference agent.

`await check(url_or_app, ...)` runs the cases and returns a `Report`; `python -m adapter.conformance`
is the same from a shell. `create_reference_app()` is the scripted agent that grades AG-UI clients
(`python -m adapter.conformance serve`). See docs/conformance.md.
"""

from adapter.conformance._check import assert_conformant, case_catalogue, check
from adapter.conformance._reference import Recording, create_reference_app
from adapter.conformance._report import CaseResult, ConformanceFailure, Report, Status
from adapter.conformance._restart import restart_command

__all__ = [
    "CaseResult",
    "ConformanceFailure",
    "Recording",
    "Report",
    "Status",
    "assert_conformant",
    "case_catalogue",
    "check",
    "create_reference_app",
    "restart_command",
]
