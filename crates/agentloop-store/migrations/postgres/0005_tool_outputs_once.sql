-- A tool's output is stored once. Before, a large result was written up to five times: in its
-- tool message, in its execution record (`result`, and `structured_result`, often just the JSON
-- of the same text) and twice more in the run's trace message (whose metadata no longer holds
-- results; agentloop-core leaves them out).
--
-- `tool_outputs` holds each large text once per run, named by its SHA-256 (lowercase hex): the
-- tool message (`messages.content_hash`) and the record (`tool_executions.result_hash`) that
-- carry the same text both name it and leave their own column NULL; smaller texts stay in their
-- row. `structured_is_result` = 1 says that the structured result is exactly the JSON parse of
-- `result` (its column is NULL then). The rows of a run go with the run.

CREATE TABLE tool_outputs (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    hash TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (run_id, hash)
);

ALTER TABLE messages ADD COLUMN content_hash TEXT;
ALTER TABLE tool_executions ADD COLUMN result_hash TEXT;
ALTER TABLE tool_executions ADD COLUMN structured_is_result BIGINT NOT NULL DEFAULT 0;
