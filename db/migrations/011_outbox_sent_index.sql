-- migrate: no-transaction
-- Retention deletes sent events oldest first (OUTBOX_RETENTION_HOURS); this index finds them
-- without reading the table. CONCURRENTLY: the table takes writes while the index builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_events_sent ON outbox_events (sent_at) WHERE status = 'sent';
