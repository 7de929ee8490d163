-- migrate: no-transaction
-- A PaymentIntent settles one order: a provider that answers one order's PaymentIntent for another
-- (docs/design.md §11) meets this index, and the answer is set aside instead. Per tenant, as every key
-- (docs/design.md §1); an answer naming another tenant's PaymentIntent never matches its order.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS orders_one_payment_intent ON orders (tenant_id, payment_intent_id) WHERE payment_intent_id IS NOT NULL;
