-- migrate: no-transaction
-- A Stripe refund is counted once (docs/design.md §11): refundOrder's own, the webhook's and the
-- reconciler's sweep all record it by Stripe's refund id, and a second record of it meets this index.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS refunds_one_per_provider_refund ON refunds (tenant_id, provider_refund_id) WHERE provider_refund_id IS NOT NULL;
