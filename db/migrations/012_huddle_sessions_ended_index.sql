-- migrate: no-transaction
-- Retention deletes ended sessions oldest first (HUDDLE_RETENTION_HOURS), with their participants.
CREATE INDEX CONCURRENTLY IF NOT EXISTS huddle_sessions_ended ON huddle_sessions (ended_at) WHERE ended_at IS NOT NULL;
