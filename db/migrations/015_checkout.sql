-- Checkout with an outside payment (docs/design.md §11). Transaction 1 holds the coupon, inserts
-- the order in PENDING_PAYMENT and its payment intent (the idempotency key every call about the
-- order sends to the provider) and commits; the provider is called with nothing held; transaction 2
-- records the outcome with conditional updates, so the first writer of an outcome wins.
--   a coupon held by one order at a time -> coupons.held_by_order_id, set only where it is null
--   a coupon pays at most one order      -> the coupon's own row (redeemed_at), and orders_one_per_coupon
--   one charge per order                 -> payment_intents.idempotency_key, the same on every call

-- The order that holds the coupon while its payment is not known. Nullable and without a default:
-- adding it changes only the catalogue.
ALTER TABLE coupons ADD COLUMN held_by_order_id uuid;

CREATE TABLE orders (
  tenant_id         text NOT NULL REFERENCES tenants (id),
  id                uuid NOT NULL,
  member_id         text NOT NULL CHECK (char_length(member_id) BETWEEN 1 AND 128),
  status            text NOT NULL CHECK (status IN ('PENDING_PAYMENT', 'PAID', 'CANCELED')),
  amount_yen        integer NOT NULL CHECK (amount_yen > 0),
  -- The coupon's value; it may exceed the amount, and the charge is then 0.
  discount_yen      integer NOT NULL CHECK (discount_yen >= 0),
  charged_yen       integer NOT NULL,
  coupon_id         uuid,
  -- The provider's PaymentIntent (pi_…), once it answered with one.
  payment_intent_id text CHECK (char_length(payment_intent_id) BETWEEN 1 AND 255),
  created_at        timestamptz NOT NULL,
  settled_at        timestamptz,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, coupon_id) REFERENCES coupons (tenant_id, id),
  CONSTRAINT orders_charged_is_amount_less_discount CHECK (charged_yen = greatest(amount_yen - discount_yen, 0)),
  CONSTRAINT orders_discount_needs_coupon CHECK (coupon_id IS NOT NULL OR discount_yen = 0),
  CONSTRAINT orders_settled_when_final CHECK ((status = 'PENDING_PAYMENT') = (settled_at IS NULL))
);

-- A coupon pays at most one order: it is held by or redeemed for one that is not canceled.
CREATE UNIQUE INDEX orders_one_per_coupon ON orders (tenant_id, coupon_id) WHERE coupon_id IS NOT NULL AND status <> 'CANCELED';
-- orders(first): a member's newest first, and the tenant's for its admin.
CREATE INDEX orders_by_member ON orders (tenant_id, member_id, created_at DESC, id);
CREATE INDEX orders_by_tenant ON orders (tenant_id, created_at DESC, id);

-- One per order that has something to charge. The request that wrote it calls the provider after
-- its commit; the reconciler resends the same request (same key) once next_attempt_at has passed.
CREATE TABLE payment_intents (
  tenant_id          text NOT NULL,
  order_id           uuid NOT NULL,
  -- Sent as Idempotency-Key on every call about the order: the provider makes one charge for it.
  idempotency_key    text NOT NULL CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
  amount_yen         integer NOT NULL CHECK (amount_yen > 0),
  currency           text NOT NULL DEFAULT 'jpy' CHECK (currency = 'jpy'),
  payment_method     text NOT NULL CHECK (char_length(payment_method) BETWEEN 1 AND 255),
  status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'declined')),
  provider_intent_id text CHECK (char_length(provider_intent_id) BETWEEN 1 AND 255),
  -- The provider's decline_code (or its error code) for a declined payment.
  decline_code       text CHECK (char_length(decline_code) <= 255),
  -- Calls the reconciler sent, and why the last answer did not settle it.
  resends            integer NOT NULL DEFAULT 0 CHECK (resends >= 0),
  last_error         text CHECK (char_length(last_error) <= 500),
  created_at         timestamptz NOT NULL DEFAULT now(),
  next_attempt_at    timestamptz NOT NULL,
  settled_at         timestamptz,
  PRIMARY KEY (tenant_id, order_id),
  FOREIGN KEY (tenant_id, order_id) REFERENCES orders (tenant_id, id),
  CONSTRAINT payment_intents_one_key UNIQUE (tenant_id, idempotency_key),
  CONSTRAINT payment_intents_settled_when_final CHECK ((status = 'pending') = (settled_at IS NULL))
);

-- What the reconciler looks for: pending payments whose time has come.
CREATE INDEX payment_intents_due ON payment_intents (next_attempt_at) WHERE status = 'pending';
