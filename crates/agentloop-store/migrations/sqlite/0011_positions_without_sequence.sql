-- Fewer pages per step (the performance issue): `messages` and `tool_executions` numbered their
-- rows with AUTOINCREMENT, which keeps the last number in `sqlite_sequence` and so writes that
-- table's page in every step that saves a message or a tool call (almost every step: one page
-- of the eight to ten a step writes). An INTEGER PRIMARY KEY without it numbers new rows the
-- same way, one more than the largest: `position` still orders a session's messages and a
-- run's tool calls as they were saved. (A number could be given again only after the rows with
-- the largest numbers were deleted, whose session is gone with them.)
--
-- SQLite cannot drop AUTOINCREMENT from a table: each is rebuilt with the same columns,
-- constraints, index and rows (their positions kept).

CREATE TABLE messages_rebuilt (
    position INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id TEXT,
    kind TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    metadata TEXT,
    created_at BIGINT NOT NULL,
    content_hash TEXT
);

INSERT INTO messages_rebuilt (position, id, session_id, run_id, kind, role, content, tool_calls,
        tool_call_id, metadata, created_at, content_hash)
    SELECT position, id, session_id, run_id, kind, role, content, tool_calls, tool_call_id,
        metadata, created_at, content_hash
    FROM messages;

DROP TABLE messages;
ALTER TABLE messages_rebuilt RENAME TO messages;
CREATE INDEX messages_by_session ON messages (session_id, position);

CREATE TABLE tool_executions_rebuilt (
    position INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    call_id TEXT NOT NULL,
    iteration BIGINT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    duration_ms BIGINT NOT NULL,
    status TEXT NOT NULL,
    result TEXT,
    structured_result TEXT,
    error TEXT,
    result_hash TEXT,
    structured_is_result BIGINT NOT NULL DEFAULT 0,
    cost_usd DOUBLE PRECISION,
    UNIQUE (run_id, call_id)
);

INSERT INTO tool_executions_rebuilt (position, run_id, call_id, iteration, tool, arguments,
        started_at, duration_ms, status, result, structured_result, error, result_hash,
        structured_is_result, cost_usd)
    SELECT position, run_id, call_id, iteration, tool, arguments, started_at, duration_ms,
        status, result, structured_result, error, result_hash, structured_is_result, cost_usd
    FROM tool_executions;

DROP TABLE tool_executions;
ALTER TABLE tool_executions_rebuilt RENAME TO tool_executions;

DELETE FROM sqlite_sequence WHERE name IN ('messages', 'tool_executions');
