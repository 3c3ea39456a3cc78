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
