-- What a tool call cost, as the tool reported it (MCP `_meta["agentloop/cost_usd"]`, issue 13):
-- kept with the call's record, so that a run that goes on after a pause or a crash still shows
-- each call's cost in its `<ToolCallHistory>`. NULL: the tool reported none.

ALTER TABLE tool_executions ADD COLUMN cost_usd DOUBLE PRECISION;
