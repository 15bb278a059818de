"""`python -m adapter.conformance check URL ...` checks a server; `... serve --port P` serves the reference agent."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from adapter.conformance._check import check
from adapter.conformance._restart import restart_command


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and run it; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(args)
    return _serve(args)


def _parser() -> argparse.ArgumentParser:
    script = os.path.basename(sys.argv[0])  # the agui-conformance console script, or `-m`'s __main__.py
    prog = script if script.startswith("agui-") else "python -m adapter.conformance"
    parser = argparse.ArgumentParser(prog=prog, description="The AG-UI conformance kit.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("check", help="check an AG-UI endpoint's interrupt contract (exit 1 on a failure)")
    run.add_argument("url", help="the AG-UI endpoint, e.g. http://127.0.0.1:8000/agui/")
    run.add_argument("--frontend-tool", required=True, metavar="NAME", help="a client tool to declare")
    run.add_argument("--frontend-message", required=True, metavar="TEXT", help="makes the agent call NAME")
    run.add_argument("--approval-message", required=True, metavar="TEXT", help="makes it call a gated server tool")
    run.add_argument("--parallel-approval-message", metavar="TEXT", help="opens two interrupts at once")
    run.add_argument("--restart-cmd", metavar="CMD", help="a shell command that restarts the server")
    run.add_argument("--executions-url", metavar="URL", help='GET URL?thread=ID -> {"executions": N}: exact verdicts')
    run.add_argument(
        "--thread-url", metavar="URL", help='GET URL ({thread} replaced by a thread id) -> {"messages": [...]}'
    )
    run.add_argument(
        "--allow-not-graded",
        action="store_true",
        help="exit 0 even when a part (approvals, client tools) could not be graded at all",
    )
    run.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    run.add_argument("--junit", metavar="PATH", help="also write the report as JUnit XML, one test case per case")
    run.add_argument("--timeout", type=float, default=60.0, metavar="S", help="seconds per request (default 60)")
    serve = commands.add_parser("serve", help="serve the reference agent for client authors")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--allow-reset", action="store_true", help="let DELETE /report forget every thread")
    return parser


def _check(args: argparse.Namespace) -> int:
    restart = restart_command(args.restart_cmd, args.url) if args.restart_cmd else None
    report = asyncio.run(
        check(
            args.url,
            frontend_tool=args.frontend_tool,
            frontend_message=args.frontend_message,
            approval_message=args.approval_message,
            parallel_approval_message=args.parallel_approval_message,
            restart=restart,
            timeout=args.timeout,
            executions_url=args.executions_url,
            thread_url=args.thread_url,
            allow_not_graded=args.allow_not_graded,
        )
    )
    if args.json:
        report.write_json(args.json)
    if args.junit:
        report.write_junit(args.junit)
    print(report.table(colour=sys.stdout.isatty() and "NO_COLOR" not in os.environ))
    return report.exit_code


def _serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        print("serve needs uvicorn: pip install 'agui-adapter[conformance]'", file=sys.stderr)
        return 2
    from adapter.conformance._reference import create_reference_app

    print(f"Reference agent: http://{args.host}:{args.port}/  scenarios: /scenarios  report: /report", flush=True)
    uvicorn.run(create_reference_app(allow_reset=args.allow_reset), host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
