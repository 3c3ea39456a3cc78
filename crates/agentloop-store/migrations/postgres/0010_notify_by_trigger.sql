-- The news of a run's new events (NOTIFY agentloop_runs, '<run id>'; see notices.rs) is sent by
-- the database as the events are inserted, instead of by a `SELECT pg_notify` of its own in
-- every step: one round trip less per step. Delivered when the step commits, as before; a step
-- whose events were all stored already (a replay) sends none.

CREATE FUNCTION agentloop_notify_run_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentloop_runs', runs.run_id)
        FROM (SELECT DISTINCT run_id FROM new_events) AS runs;
    RETURN NULL;
END
$$;

CREATE TRIGGER run_events_notify AFTER INSERT ON run_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION agentloop_notify_run_events();
