#!/usr/bin/env bash
# Writes .ci/constraints.txt, the lock of what .ci/run installs: every package, direct or not, at one version.
# To refresh it (a newer release within pyproject.toml's bounds, or a changed dependency): `bash .ci/lock.sh`,
# then `bash .ci/run`, and commit the two files together once it passes. It resolves afresh, in a throwaway
# virtualenv, what .ci/run installs (the dev group and the inspector extra), at the newest versions allowed.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=$(mktemp -d /tmp/agui-lock.XXXXXX)
trap 'rm -rf "$venv"' EXIT
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet --group dev -e ".[inspector]"
{
    echo "# The versions .ci/run installs (pip install -c .ci/constraints.txt ...), written by .ci/lock.sh:"
    echo "# run \`bash .ci/lock.sh\` to refresh them, then .ci/run, and commit both. Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), Linux x86_64."
    "$venv/bin/python" -m pip freeze --exclude-editable --exclude agui-adapter
} >.ci/constraints.txt.new
mv .ci/constraints.txt.new .ci/constraints.txt
echo "wrote .ci/constraints.txt: $(grep -cv '^#' .ci/constraints.txt) packages"
