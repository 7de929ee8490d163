-- migrate: no-transaction
-- A coupon pays at most one order that is pending or paid: a canceled order, and one wholly refunded
-- (which gives its coupon back), no longer holds it. Replaces orders_one_per_coupon (020 drops it).
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS orders_one_per_open_coupon ON orders (tenant_id, coupon_id) WHERE coupon_id IS NOT NULL AND status IN ('PENDING_PAYMENT', 'PAID');
