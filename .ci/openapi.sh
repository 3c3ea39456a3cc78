#!/usr/bin/env bash
# Validates the OpenAPI document a real `agentloop serve` serves at /openapi.json against the
# OpenAPI 3.1 specification, with openapi-spec-validator (PyPI). The server runs on a SQLite
# store in a temp dir, its LLM a scripted OpenAI-compatible one as a separate process.
set -euo pipefail
cd "$(dirname "$0")/.."

VALIDATOR_VERSION=0.9.0
source .ci/scripted_server.sh

# Made again when it does not run (a target directory moved from another path keeps venvs
# whose scripts name the old one).
if ! target/openapi-venv/bin/openapi-spec-validator --help >/dev/null 2>&1; then
    echo "openapi: installing openapi-spec-validator $VALIDATOR_VERSION"
    python3 -m venv --clear target/openapi-venv
    target/openapi-venv/bin/pip install --quiet --disable-pip-version-check "openapi-spec-validator==$VALIDATOR_VERSION"
fi

start_scripted_server openapi "Validated."

curl --silent --show-error --fail "$address/openapi.json" > "$work/openapi.json"
echo "openapi: validating $address/openapi.json as OpenAPI 3.1"
target/openapi-venv/bin/openapi-spec-validator --schema 3.1 --validation-errors all "$work/openapi.json"
