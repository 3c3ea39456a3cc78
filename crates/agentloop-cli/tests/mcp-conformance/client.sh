#!/bin/sh
# The client of the MCP conformance suite's client scenarios: `agentloop run` itself, with the
# scenario's server (its URL, the last argument) as the MCP server `conformance` and a scripted
# model that calls the scenario's tool (MCP_CONFORMANCE_SCENARIO names the scenario) and then
# answers. $AGENTLOOP is the binary. crates/agentloop-cli/tests/mcp_conformance.rs runs it.
set -e
for url; do :; done
dir=$(mktemp -d)
cat > "$dir/agentloop.toml" <<TOML
[llm]
provider = "scripted"
script = "script.toml"

[store]
url = "sqlite::memory:"

[mcp_servers.conformance]
url = "$url"
startup_timeout_s = 20
TOML
# The auth scenarios: the suite's authorization server approves at once, so agentloop follows
# the authorization URL itself (interactive = false); the client the scenario registered, if
# any, comes in MCP_CONFORMANCE_CONTEXT. The tokens are sealed with a key made for the run.
case "$MCP_CONFORMANCE_SCENARIO" in
  auth/*)
    context() { node -e 'const c = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}"); process.stdout.write(c[process.argv[1]] || "")' "$1"; }
    client_id=$(context client_id)
    client_secret=$(context client_secret)
    {
      echo '[mcp_servers.conformance.oauth]'
      echo 'interactive = false'
      echo 'client_metadata_url = "https://conformance-test.local/client-metadata.json"'
      if [ -n "$client_id" ]; then echo "client_id = \"$client_id\""; fi
      if [ -n "$client_secret" ]; then echo "client_secret = \"$client_secret\""; fi
      case "$MCP_CONFORMANCE_SCENARIO" in
        auth/client-credentials-*) if [ -n "$client_secret" ]; then echo 'grant = "client_credentials"'; fi ;;
      esac
    } >> "$dir/agentloop.toml"
    AGENTLOOP_TOKEN_KEY=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
    export AGENTLOOP_TOKEN_KEY
    ;;
esac
case "$MCP_CONFORMANCE_SCENARIO" in
  tools_call) call='tool_calls = [{ name = "conformance.add_numbers", arguments = { a = 2, b = 3 } }]' ;;
  elicitation-*) call='tool_calls = [{ name = "conformance.test_client_elicitation_defaults", arguments = {} }]' ;;
  sse-retry) call='tool_calls = [{ name = "conformance.test_reconnection", arguments = {} }]' ;;
  auth/*) call='tool_calls = [{ name = "conformance.test-tool", arguments = {} }]' ;;
  *) call='' ;;
esac
cat > "$dir/script.toml" <<TOML
[[scenarios]]
[[scenarios.steps]]
text = "Calling the scenario's tool."
$call
[[scenarios.steps]]
text = "Done."
TOML
# The answers typed at `agentloop run`'s prompts: an elicitation is accepted with every field
# left empty, so that the requested schema's defaults fill them (what
# elicitation-sep1034-client-defaults checks); other scenarios ask nothing.
printf 'y\n\n\n\n\n\n\n' | "$AGENTLOOP" --config "$dir/agentloop.toml" run "run the conformance scenario"
