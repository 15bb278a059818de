# Sourced by .ci/lowest and .ci/newest: a virtualenv of their own and the fast tests that need no service.

# The tests the two jobs run: the public API, the scripted scenarios, the HTTP edge, history and the resume
# gate, in-process (no database server, browser, Node or framework virtualenv); about a minute.
SUBSET=(
    tests/project/test_public_api.py
    tests/run/test_scenarios.py
    tests/edge/test_http_edge.py
    tests/history/test_history.py
    tests/resume/test_resume_gate.py
    tests/project/test_lazy_imports.py
)

# subset_venv NAME: a new virtualenv .venv-NAME (emptied first) with an up-to-date pip, whose python is $PY.
subset_venv() {
    python3 -m venv --clear ".venv-$1"
    PY=".venv-$1/bin/python"
    "$PY" -m pip install --quiet --upgrade pip
}

# subset_run: the versions installed, then the tests.
subset_run() {
    "$PY" -m pip list --format=freeze 2>/dev/null |
        grep -iE '^(ag-ui-protocol|starlette|pydantic|pydantic[-_]core|jsonschema|google-re2|httpx|uvicorn|opentelemetry-api|pytest|pytest-asyncio)=='
    "$PY" -m pytest -q -x -p no:cacheprovider "${SUBSET[@]}"
}
