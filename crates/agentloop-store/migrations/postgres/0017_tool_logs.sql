-- What a tool call's MCP server logged while it ran (notifications/message), as JSON; NULL
-- when nothing.
ALTER TABLE tool_executions ADD COLUMN logs TEXT;
