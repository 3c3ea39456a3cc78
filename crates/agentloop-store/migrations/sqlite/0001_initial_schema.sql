-- Portable schema: ids are TEXT, timestamps BIGINT milliseconds since the epoch (UTC), JSON is
-- TEXT and booleans are 0/1, so that one set of queries serves SQLite and PostgreSQL alike.
-- Declared types must stay among INTEGER/BIGINT/TEXT: sqlx's Any driver cannot read a NULL from a
-- column declared BOOLEAN or TIMESTAMP in SQLite.

CREATE TABLE users (
    id TEXT PRIMARY KEY NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE sessions (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id),
    title TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    active_run_id TEXT,
    lock_expires_at BIGINT
);

CREATE INDEX sessions_by_update ON sessions (updated_at);
CREATE INDEX sessions_by_user ON sessions (user_id, updated_at);

CREATE TABLE messages (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    run_id TEXT,
    kind TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    metadata TEXT,
    created_at BIGINT NOT NULL
);

CREATE INDEX messages_by_session ON messages (session_id, position);

-- No foreign key to sessions: a run that does not save the chat may name a session that has no
-- row. Deleting a session deletes its runs explicitly, in the same transaction.
CREATE TABLE runs (
    id TEXT PRIMARY KEY NOT NULL,
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    query TEXT NOT NULL,
    model TEXT,
    status TEXT NOT NULL,
    save_chat BIGINT NOT NULL,
    context TEXT NOT NULL,
    iterations BIGINT NOT NULL,
    tools_used BIGINT NOT NULL,
    prompt_tokens BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    finalize_reason TEXT,
    answer_message_id TEXT,
    error_code TEXT,
    error_message TEXT,
    started_at BIGINT NOT NULL,
    finished_at BIGINT
);

CREATE INDEX runs_by_session ON runs (session_id, started_at);

CREATE TABLE tool_executions (
    position INTEGER PRIMARY KEY AUTOINCREMENT,
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
    UNIQUE (run_id, call_id)
);

CREATE TABLE run_events (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
