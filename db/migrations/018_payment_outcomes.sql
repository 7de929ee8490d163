-- Checkout as shoppers pay (docs/design.md §11): a payment that asks for 3-D Secure waits on its
-- customer, outcomes also arrive by Stripe's signed webhooks, a paid order can be refunded, and a
-- payment the provider answered with something that does not match its order is set aside.
--   an outcome recorded once, whoever learns it -> the order's row, conditional on its status
--   a webhook event acted on once                -> provider_events' primary key (the event's id)
--   refunds never beyond the charge              -> the order's row, locked by the refund that reserves
--   one refund at Stripe per refund              -> refunds.idempotency_key, the same on every call
--   a PaymentIntent settles one order            -> orders_one_payment_intent (018)

-- REFUNDED once the whole charge is refunded; a partial refund leaves the order PAID.
ALTER TABLE orders DROP CONSTRAINT orders_status_check;
ALTER TABLE orders ADD CONSTRAINT orders_status_check CHECK (status IN ('PENDING_PAYMENT', 'PAID', 'CANCELED', 'REFUNDED'));
-- A constant default: adding it changes only the catalogue.
ALTER TABLE orders ADD COLUMN refunded_yen integer NOT NULL DEFAULT 0;
ALTER TABLE orders ADD CONSTRAINT orders_refunds_within_charge CHECK (refunded_yen >= 0 AND refunded_yen <= charged_yen);
ALTER TABLE orders ADD CONSTRAINT orders_refunded_when_whole
  CHECK ((status = 'REFUNDED') = (refunded_yen > 0 AND refunded_yen = charged_yen));
-- Stripe's decline_code (or its error code) of a declined or failed payment.
ALTER TABLE orders ADD COLUMN failure_code text CHECK (char_length(failure_code) BETWEEN 1 AND 255);

-- What the provider last said of the payment: its PaymentIntent's status (requires_action,
-- processing, …) once it named one. provider_intent_id is kept from the first answer that named it:
-- from then on the payment is looked up by its id, never created again.
ALTER TABLE payment_intents ADD COLUMN provider_status text CHECK (char_length(provider_status) BETWEEN 1 AND 64);
-- When the PaymentIntent first asked for authentication: PAYMENTS_ACTION_TIMEOUT_MS counts from here.
ALTER TABLE payment_intents ADD COLUMN action_since timestamptz;
-- Answers that failed the same way, pass after pass; after enough of them, or at once for an answer
-- that does not match its order, the payment is set aside for an operator and asked no more.
ALTER TABLE payment_intents ADD COLUMN same_failures integer NOT NULL DEFAULT 0 CHECK (same_failures >= 0);
ALTER TABLE payment_intents ADD COLUMN set_aside_at timestamptz;
ALTER TABLE payment_intents ADD CONSTRAINT payment_intents_set_aside_while_pending CHECK (set_aside_at IS NULL OR status = 'pending');

-- Stripe's webhook events by their id: a repeat is answered and not acted on again. Stripe's account
-- sends them, not a tenant: the tenant and order are what the event's PaymentIntent names, when it
-- names one of this server's. claimed_at: the delivery acting on it now (a second delivery of the
-- same event meanwhile waits for Stripe's next attempt); handled_at: done.
CREATE TABLE provider_events (
  event_id    text PRIMARY KEY CHECK (char_length(event_id) BETWEEN 1 AND 255),
  type        text NOT NULL CHECK (char_length(type) BETWEEN 1 AND 255),
  tenant_id   text,
  order_id    uuid,
  received_at timestamptz NOT NULL DEFAULT now(),
  claimed_at  timestamptz NOT NULL DEFAULT now(),
  handled_at  timestamptz,
  result      text CHECK (char_length(result) <= 500)
);
-- Retention deletes by age.
CREATE INDEX provider_events_received ON provider_events (received_at);

-- A refund of a paid order, reserved in the refund's first transaction (its amount counts against
-- what is left to refund from then on), sent to Stripe with no transaction held, recorded in a
-- second. The same key on every call about it: Stripe makes it once.
CREATE TABLE refunds (
  tenant_id          text NOT NULL,
  id                 uuid NOT NULL,
  order_id           uuid NOT NULL,
  idempotency_key    text NOT NULL CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
  amount_yen         integer NOT NULL CHECK (amount_yen > 0),
  status             text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'succeeded', 'failed')),
  provider_refund_id text CHECK (char_length(provider_refund_id) BETWEEN 1 AND 255),
  failure_code       text CHECK (char_length(failure_code) BETWEEN 1 AND 255),
  resends            integer NOT NULL DEFAULT 0 CHECK (resends >= 0),
  last_error         text CHECK (char_length(last_error) <= 500),
  created_at         timestamptz NOT NULL DEFAULT now(),
  next_attempt_at    timestamptz NOT NULL,
  settled_at         timestamptz,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, order_id) REFERENCES orders (tenant_id, id),
  CONSTRAINT refunds_one_key UNIQUE (tenant_id, idempotency_key),
  CONSTRAINT refunds_settled_when_final CHECK ((status = 'pending') = (settled_at IS NULL))
);
CREATE INDEX refunds_by_order ON refunds (tenant_id, order_id);
-- What the reconciler looks for: refunds whose outcome is not known and whose time has come.
CREATE INDEX refunds_due ON refunds (next_attempt_at) WHERE status = 'pending';
