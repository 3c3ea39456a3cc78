-- Pruning (`[store.retention]`): when a finished run's events and checkpoint were deleted, and
-- the finished runs not pruned yet, oldest first, for the pruner to find without a scan.
ALTER TABLE runs ADD COLUMN pruned_at BIGINT;
CREATE INDEX runs_unpruned ON runs (finished_at) WHERE pruned_at IS NULL AND finished_at IS NOT NULL;
