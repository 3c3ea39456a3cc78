-- API keys of the HTTP server. Only a SHA-256 of each key is kept: whoever reads the database
-- cannot use what it holds. `prefix` lets a person recognise a key; `revoked_at` keeps revoked
-- keys listed (and their ids stable) instead of deleting them.

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY NOT NULL,
    user_id TEXT NOT NULL REFERENCES users (id),
    key_hash TEXT NOT NULL UNIQUE,
    prefix TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);

CREATE INDEX api_keys_by_user ON api_keys (user_id, created_at);
