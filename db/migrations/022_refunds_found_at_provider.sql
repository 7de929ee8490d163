-- Refunds made outside this server (in Stripe's dashboard, or by another client of the account)
-- are recorded too (docs/design.md §11), so that an order's refunded_yen equals what Stripe refunded:
--   a Stripe refund counted once            -> refunds_one_per_provider_refund (023), per Stripe refund id
--   a refund a sweep has not yet looked for -> refund_sweeps, the one cursor over the account's refunds

-- Who made the refund: refundOrder ('refund_order', with the key every call about it sends), or
-- someone else, learnt from Stripe ('provider': no key, made when this server learns of it).
-- A constant default and a dropped NOT NULL change only the catalogue.
ALTER TABLE refunds ADD COLUMN origin text NOT NULL DEFAULT 'refund_order';
ALTER TABLE refunds ALTER COLUMN idempotency_key DROP NOT NULL;
-- NOT VALID, then VALIDATE: the check scans the table without holding off its writers.
ALTER TABLE refunds ADD CONSTRAINT refunds_origin_check CHECK (origin IN ('refund_order', 'provider')) NOT VALID;
ALTER TABLE refunds VALIDATE CONSTRAINT refunds_origin_check;
ALTER TABLE refunds ADD CONSTRAINT refunds_key_when_made_here
  CHECK ((origin = 'refund_order') = (idempotency_key IS NOT NULL)) NOT VALID;
ALTER TABLE refunds VALIDATE CONSTRAINT refunds_key_when_made_here;
ALTER TABLE refunds ADD CONSTRAINT refunds_found_when_made
  CHECK (origin = 'refund_order' OR (status = 'succeeded' AND provider_refund_id IS NOT NULL)) NOT VALID;
ALTER TABLE refunds VALIDATE CONSTRAINT refunds_found_when_made;

-- The reconciler's sweep over the refunds of the Stripe account (GET /v1/refunds by creation time):
-- every refund created at or before through_created (Stripe's clock, epoch seconds) is known here.
-- One row: the account is one, whatever the tenant (as provider_events). A sweep that stops at its
-- page limit goes on after resume_after (the last refund it read; Stripe's list cursor) next time,
-- and moves through_created to newest_created once it reaches the bottom. sweep_no: the claim of
-- the sweep under way, so that a slow sweep never writes over a later one's place. It starts with
-- the first order ever made: a refund of any of this server's charges is found, whatever its age.
CREATE TABLE refund_sweeps (
  name            text PRIMARY KEY CHECK (name = 'refunds'),
  through_created bigint NOT NULL,
  resume_after    text CHECK (char_length(resume_after) BETWEEN 1 AND 255),
  newest_created  bigint,
  sweep_no        bigint NOT NULL DEFAULT 0,
  next_sweep_at   timestamptz NOT NULL DEFAULT now()
);
INSERT INTO refund_sweeps (name, through_created)
SELECT 'refunds', floor(extract(epoch FROM coalesce(min(created_at), now())))::bigint FROM orders;
