-- Durable runs. Each step of a run saves what the run needs to go on (its checkpoint): what it
-- started from once (`run_inputs`), and the rest of its state as a small head that each step
-- replaces (`runs.state_head`, with `runs.state_seq`, the seq of the step's last event). Its
-- messages and tool executions are already stored once each; the messages of a run that does
-- not keep them in its session are stored for the run alone (`run_turn`).
--
-- Every run in progress has an owner (`runs.owner`): an instance, a process that shows signs of
-- life in `instances`. A server's runs whose owner stopped or fell silent are adopted by another
-- server. `runs.cancel_requested` lets any instance ask the owner to cancel.

CREATE TABLE instances (
    id TEXT PRIMARY KEY NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL,
    stopped_at BIGINT
);

CREATE TABLE run_inputs (
    run_id TEXT PRIMARY KEY NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    input TEXT NOT NULL
);

CREATE TABLE run_turn (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position BIGINT NOT NULL,
    message TEXT NOT NULL,
    PRIMARY KEY (run_id, position)
);

ALTER TABLE runs ADD COLUMN owner TEXT;
ALTER TABLE runs ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN state_head TEXT;
ALTER TABLE runs ADD COLUMN state_seq BIGINT;

-- The runs in progress, by owner: what adoption and cancel requests look at.
CREATE INDEX runs_in_progress ON runs (owner) WHERE status = 'running';
