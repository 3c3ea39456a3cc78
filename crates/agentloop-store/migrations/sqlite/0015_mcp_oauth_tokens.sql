-- OAuth records of MCP servers (client registration, access and refresh tokens), one per server
-- and user. `sealed` is encrypted by agentloop with a key from its environment
-- (AGENTLOOP_TOKEN_KEY) that the database never holds: reading this table gives no token.

CREATE TABLE mcp_oauth_tokens (
    server TEXT NOT NULL,
    user_id TEXT NOT NULL,
    sealed TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (server, user_id)
);
