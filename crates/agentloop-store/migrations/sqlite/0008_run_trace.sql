-- The trace context of a run (a W3C traceparent: its span, when traces are exported), so that a
-- run that goes on after a pause or a restart continues the same trace.
ALTER TABLE runs ADD COLUMN traceparent TEXT;
