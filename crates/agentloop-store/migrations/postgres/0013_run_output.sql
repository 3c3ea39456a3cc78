-- The typed answer of a run with an output schema (its JSON), shown by GET /v1/runs/{id}.
ALTER TABLE runs ADD COLUMN output TEXT;
