# Sourced by the CI scripts that need a running server: a real `agentloop serve` on a SQLite
# store in a temp dir ($work), its LLM a scripted OpenAI-compatible one as a separate process.
# Both are stopped and $work deleted when the script exits.
#
#   start_scripted_server LABEL ANSWER [SERVER_TOML] [KEY_USER]
#
# sets $address (the server's http://host:port) and, with KEY_USER, $key (an API key of theirs).

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

start_scripted_server() {
    local label=$1 answer=$2 server_toml=${3:-} key_user=${4:-}
    cargo build --quiet -p agentloop-cli -p agentloop-test-support --bins
    local bin="${CARGO_TARGET_DIR:-target}/debug"

    "$bin/agentloop-scripted-llm" --listen 127.0.0.1:0 --answer "$answer" > "$work/llm.url" &
    pids+=($!)
    for _ in $(seq 100); do [ -s "$work/llm.url" ] && break; sleep 0.1; done
    local llm_url
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
$server_toml
TOML

    if [ -n "$key_user" ]; then
        key=$("$bin/agentloop" --config "$work/agentloop.toml" keys create --user "$key_user" 2>/dev/null | tail -1)
        if [ -z "$key" ]; then
            echo "$label: no API key could be made for $key_user" >&2
            exit 1
        fi
    fi
    "$bin/agentloop" --config "$work/agentloop.toml" serve 2> "$work/serve.log" &
    pids+=($!)
    for _ in $(seq 100); do grep -q "listening on" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
    address=$(grep -o "http://[0-9.:]*" "$work/serve.log" | head -1)
    if [ -z "$address" ]; then
        echo "$label: the server did not start" >&2
        cat "$work/serve.log" >&2
        exit 1
    fi
}
