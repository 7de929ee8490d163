-- migrate: no-transaction
-- orders_one_per_open_coupon (019) holds the rule now; this one would refuse a coupon given back by a refund.
DROP INDEX CONCURRENTLY IF EXISTS orders_one_per_coupon;
