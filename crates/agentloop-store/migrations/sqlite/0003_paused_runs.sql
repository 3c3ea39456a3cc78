-- A paused run (awaiting a human's input) keeps what it needs to resume, as JSON.
ALTER TABLE runs ADD COLUMN snapshot TEXT;
