#!/usr/bin/env bash
# Fuzzes the HTTP API from its own OpenAPI document: a real `agentloop serve` (SQLite store in a
# temp dir, a scripted OpenAI-compatible LLM as a separate process), a real API key, and
# schemathesis (PyPI). Fails on any 5xx answer.
set -euo pipefail
cd "$(dirname "$0")/.."

SCHEMATHESIS_VERSION=4.32.5
# Pinned too, so that a new hypothesis release cannot change the run. One worker: with two,
# hypothesis parses source from two threads at once and Python 3.11's parser sometimes stops
# with "AST constructor recursion depth mismatch", a runtime error of the tool, not a finding.
HYPOTHESIS_VERSION=6.169.4
source .ci/scripted_server.sh

# Made again when it does not run (a target directory moved from another path keeps venvs
# whose scripts name the old one).
if ! target/schemathesis-venv/bin/schemathesis --version >/dev/null 2>&1; then
    echo "schemathesis: installing schemathesis $SCHEMATHESIS_VERSION"
    python3 -m venv --clear target/schemathesis-venv
    target/schemathesis-venv/bin/pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" "hypothesis==$HYPOTHESIS_VERSION"
fi

start_scripted_server schemathesis "Fuzzed." "max_runs_per_user = 64" fuzz
echo "schemathesis: fuzzing $address"

target/schemathesis-venv/bin/schemathesis run "$address/openapi.json" \
    --checks not_a_server_error \
    --header "Authorization: Bearer $key" \
    --max-examples 40 \
    --workers 1 \
    --request-timeout 30 \
    --seed 1 \
    --generation-database none \
    --no-color \
    --report-dir "$work/report"
