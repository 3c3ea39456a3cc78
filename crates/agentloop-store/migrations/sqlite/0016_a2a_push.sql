-- A2A push notifications (docs/a2a.md). Where a task's client asked to be told of its state
-- changes (`a2a_push_targets`, one row per run and config id; `after_seq`: only changes after
-- that event; `finished`: the run ended and every change is queued), and the durable outbox
-- (`a2a_push_outbox`: one row per target and state change, keyed by the seq of the event that
-- changed the state, so that a change is queued once whichever instance sees it first). A
-- notification is claimed by an instance until `claimed_until`; a claim of an instance killed
-- while it sent runs out and another instance sends it. Failures are tried again at `due_at`
-- (backoff), and given up after a while (`failed_at`).

CREATE TABLE a2a_push_targets (
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    url TEXT NOT NULL,
    token TEXT,
    auth_scheme TEXT,
    auth_credentials TEXT,
    after_seq BIGINT NOT NULL,
    finished BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (run_id, id)
);

CREATE INDEX a2a_push_targets_open ON a2a_push_targets (finished);

CREATE TABLE a2a_push_outbox (
    run_id TEXT NOT NULL,
    target_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    payload TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    due_at BIGINT NOT NULL,
    claimed_by TEXT,
    claimed_until BIGINT,
    sent_at BIGINT,
    failed_at BIGINT,
    PRIMARY KEY (run_id, target_id, seq),
    FOREIGN KEY (run_id, target_id) REFERENCES a2a_push_targets (run_id, id) ON DELETE CASCADE
);

CREATE INDEX a2a_push_outbox_due ON a2a_push_outbox (sent_at, failed_at, due_at);
