"""A demo server in its own process that a shell command can restart: what `--restart-cmd` is tested with.

    python tests/restartable.py start STATE_DIR PORT DB   # start the demo on 127.0.0.1:PORT with SQLite DB
    python tests/restartable.py restart STATE_DIR         # stop it (SIGTERM) and start it again, same flags
    python tests/restartable.py stop STATE_DIR

Each command returns once the server is up (or gone); STATE_DIR keeps the pid and the flags.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
"""The checkout: `examples` is imported from there, installed or not."""
_BOUND = 30.0  # seconds a start or a stop may take


def start(state: Path, port: int, db: str) -> None:
    state.mkdir(parents=True, exist_ok=True)
    (state / "flags.json").write_text(json.dumps({"port": port, "db": db}))
    with (state / "server.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "examples.demo", "--port", str(port), "--db", db],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=ROOT,
        )
    (state / "pid").write_text(str(process.pid))
    _wait(lambda: _answers(port), f"the demo did not start on port {port}")


def stop(state: Path) -> None:
    pid_file = state / "pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    pid_file.unlink()
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    _wait(lambda: not _alive(pid), f"the demo (pid {pid}) did not stop")


def restart(state: Path) -> None:
    flags = json.loads((state / "flags.json").read_text())
    stop(state)
    start(state, flags["port"], flags["db"])


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # reap it when it is our child
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _wait(condition: Callable[[], bool], message: str) -> None:
    deadline = time.monotonic() + _BOUND
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(message)
        time.sleep(0.05)


if __name__ == "__main__":
    command, directory, *rest = sys.argv[1:]
    if command == "start":
        start(Path(directory), int(rest[0]), rest[1])
    elif command == "restart":
        restart(Path(directory))
    else:
        stop(Path(directory))
