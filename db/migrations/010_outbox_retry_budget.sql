-- The relay retries an event for a time budget (OUTBOX_RETRY_FOR), not a count of attempts alone.
-- requeued_at: a dead event given back (npm run outbox:requeue) gets a fresh budget, counted from
-- then instead of from created_at. last_attempt_at: when the relay last claimed it; after an
-- outage, the retries that failed before the receiver came back are brought forward.
-- Nullable columns without a default: PostgreSQL adds them without rewriting the table.
ALTER TABLE outbox_events ADD COLUMN requeued_at timestamptz, ADD COLUMN last_attempt_at timestamptz;
