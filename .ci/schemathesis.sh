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
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "schemathesis: installing schemathesis $SCHEMATHESIS_VERSION"
python3 -m venv target/schemathesis-venv
target/schemathesis-venv/bin/pip install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION" "hypothesis==$HYPOTHESIS_VERSION"

cargo build --quiet -p agentloop-cli -p agentloop-test-support --bins
bin="${CARGO_TARGET_DIR:-target}/debug"

"$bin/agentloop-scripted-llm" --listen 127.0.0.1:0 --answer "Fuzzed." > "$work/llm.url" &
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
max_runs_per_user = 64
TOML

key=$("$bin/agentloop" --config "$work/agentloop.toml" keys create --user fuzz 2>/dev/null | tail -1)
"$bin/agentloop" --config "$work/agentloop.toml" serve 2> "$work/serve.log" &
pids+=($!)
for _ in $(seq 100); do grep -q "listening on" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
address=$(grep -o "http://[0-9.:]*" "$work/serve.log" | head -1)
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
