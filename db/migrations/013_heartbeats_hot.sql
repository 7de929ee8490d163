-- migrate: no-transaction
-- A heartbeat changes only last_heartbeat_at. While an index covered that column (and left_at, in
-- its predicate), no heartbeat could be a HOT update: each one wrote a new index entry and left a
-- dead one. No query reads the index (cleanup reaches participants through their session's
-- primary key), so it goes; docs/operations.md, "Table growth", has the measurement.
DROP INDEX CONCURRENTLY IF EXISTS huddle_participants_present;
