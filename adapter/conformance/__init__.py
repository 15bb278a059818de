"""The conformance kit: black-box checks of any AG-UI server's interrupt contract, and a reference agent.

`await check(url_or_app, ...)` runs the cases and returns a `Report`; `python -m adapter.conformance`
is the same from a shell. See docs/conformance.md.
"""

from adapter.conformance._check import case_catalogue, check
from adapter.conformance._report import CaseResult, ConformanceFailure, Report, Status
from adapter.conformance._restart import restart_command

__all__ = ["CaseResult", "ConformanceFailure", "Report", "Status", "case_catalogue", "check", "restart_command"]
