-- The trace of the transaction that wrote an event: the relay's delivery continues it, however
-- much later it runs. The runner puts the transaction's W3C traceparent in the transaction-local
-- setting app.traceparent (only while tracing is on), so the writers need not know of it.
ALTER TABLE outbox_events
  ADD COLUMN traceparent text DEFAULT nullif(current_setting('app.traceparent', true), '');
