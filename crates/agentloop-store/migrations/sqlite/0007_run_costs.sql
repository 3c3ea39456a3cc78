-- The cost of runs (issue 13): what a run's LLM calls cost in USD, from the price table
-- (`[prices."MODEL"]`), and whether every call had a price (`cost_complete` 0: the cost is a
-- lower bound; a run without a price is never counted as cheap). Runs saved before this
-- migration have no cost (NULL, incomplete).
--
-- The per-user daily limit (`[server] user_daily_cost_usd`, `user_daily_tokens`) sums a user's
-- runs since midnight UTC: `runs_by_user` answers that without reading other users' runs.

ALTER TABLE runs ADD COLUMN cost_usd DOUBLE PRECISION;
ALTER TABLE runs ADD COLUMN cost_complete BIGINT NOT NULL DEFAULT 0;

CREATE INDEX runs_by_user ON runs (user_id, started_at);
