-- Coupon campaigns, issued coupons, member-month usage and the transactional outbox.
-- Each invariant has one row or index entry where conflicting requests collide (docs/design.md §4):
--   one coupon per member per campaign  -> coupons_one_per_member (unique index)
--   a member's monthly cap              -> the member_monthly_usage row
--   the campaign budget                 -> a campaign_budget_slots row (CHECK backs it up)

CREATE TABLE campaigns (
  tenant_id    text NOT NULL REFERENCES tenants (id),
  id           text NOT NULL CHECK (id ~ '^[A-Za-z0-9_-]{1,64}$'),
  name         text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
  discount_yen integer NOT NULL CHECK (discount_yen > 0),
  budget_yen   integer NOT NULL CHECK (budget_yen > 0),
  budget_slots smallint NOT NULL DEFAULT 1 CHECK (budget_slots BETWEEN 1 AND 64),
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, id)
);

-- The budget split over one or more rows. One row serializes every issue of a campaign on its
-- lock; a very hot campaign spreads issues over several (issuedYen is their sum).
CREATE TABLE campaign_budget_slots (
  tenant_id   text NOT NULL,
  campaign_id text NOT NULL,
  slot        smallint NOT NULL CHECK (slot >= 0),
  budget_yen  integer NOT NULL CHECK (budget_yen >= 0),
  issued_yen  integer NOT NULL DEFAULT 0 CHECK (issued_yen >= 0),
  PRIMARY KEY (tenant_id, campaign_id, slot),
  FOREIGN KEY (tenant_id, campaign_id) REFERENCES campaigns (tenant_id, id),
  CONSTRAINT campaign_budget_slots_within_budget CHECK (issued_yen <= budget_yen)
);

CREATE TABLE coupons (
  tenant_id   text NOT NULL,
  id          uuid NOT NULL DEFAULT gen_random_uuid(),
  campaign_id text NOT NULL,
  member_id   text NOT NULL CHECK (char_length(member_id) BETWEEN 1 AND 128),
  month       text NOT NULL CHECK (month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
  amount_yen  integer NOT NULL CHECK (amount_yen > 0),
  issued_at   timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, id),
  FOREIGN KEY (tenant_id, campaign_id) REFERENCES campaigns (tenant_id, id)
);

CREATE UNIQUE INDEX coupons_one_per_member ON coupons (tenant_id, campaign_id, member_id);
CREATE INDEX coupons_by_member_month ON coupons (tenant_id, member_id, month);

CREATE TABLE member_monthly_usage (
  tenant_id  text NOT NULL REFERENCES tenants (id),
  member_id  text NOT NULL,
  month      text NOT NULL CHECK (month ~ '^[0-9]{4}-(0[1-9]|1[0-2])$'),
  used_yen   integer NOT NULL CHECK (used_yen >= 0),
  PRIMARY KEY (tenant_id, member_id, month)
);

-- Written in the same transaction as the fact it announces; a relay delivers it afterwards.
CREATE TABLE outbox_events (
  tenant_id       text NOT NULL,
  id              uuid NOT NULL DEFAULT gen_random_uuid(),
  topic           text NOT NULL,
  payload         jsonb NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  status          text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'dead')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  claim_id        uuid,
  last_error      text,
  sent_at         timestamptz,
  PRIMARY KEY (tenant_id, id)
);

CREATE INDEX outbox_events_due ON outbox_events (next_attempt_at) WHERE status = 'pending';
CREATE INDEX outbox_events_dead ON outbox_events (tenant_id) WHERE status = 'dead';
