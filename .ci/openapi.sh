#!/usr/bin/env bash
# Validates the OpenAPI document a real `agentloop serve` serves at /openapi.json against the
# OpenAPI 3.1 specification, with openapi-spec-validator (PyPI). The server runs on a SQLite
# store in a temp dir, its LLM a scripted OpenAI-compatible one as a separate process.
set -euo pipefail
cd "$(dirname "$0")/.."

VALIDATOR_VERSION=0.9.0
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "openapi: installing openapi-spec-validator $VALIDATOR_VERSION"
python3 -m venv target/openapi-venv
target/openapi-venv/bin/pip install --quiet --disable-pip-version-check "openapi-spec-validator==$VALIDATOR_VERSION"

cargo build --quiet -p agentloop-cli -p agentloop-test-support --bins
bin="${CARGO_TARGET_DIR:-target}/debug"

"$bin/agentloop-scripted-llm" --listen 127.0.0.1:0 --answer "Validated." > "$work/llm.url" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/llm.url" ] && break; sleep 0.1; done
llm_url=$(head -1 "$work/llm.url")

cat > "$work/agentloop.toml" <<TOML
[llm]
base_url = "$llm_url"
model = "scripted"
max_retries = 0

[store]
url = "sqlite://$work/agentloop.db"

[server]
listen = "127.0.0.1:0"
TOML

"$bin/agentloop" --config "$work/agentloop.toml" serve 2> "$work/serve.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
address=$(grep -o "http://[0-9.:]*" "$work/serve.log" | head -1)
if [ -z "$address" ]; then
    echo "openapi: the server did not start" >&2
    cat "$work/serve.log" >&2
    exit 1
fi

curl --silent --show-error --fail "$address/openapi.json" > "$work/openapi.json"
echo "openapi: validating $address/openapi.json as OpenAPI 3.1"
target/openapi-venv/bin/openapi-spec-validator --schema 3.1 --validation-errors all "$work/openapi.json"
