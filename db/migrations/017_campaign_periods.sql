-- Campaigns over time (docs/design.md §4, "Campaigns over time"): a campaign issues from starts_at
-- (its creation, unless set) until ends_at (none: no end), and its coupons expire at
-- coupons_expire_at (none: never). Each is read against the database's clock, now(), in the
-- statement that decides: an issue before starts_at or from ends_at on writes nothing, and a coupon
-- past coupons_expire_at is EXPIRED without anything written, so no sweep is needed.
ALTER TABLE campaigns
  ADD COLUMN starts_at timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN ends_at timestamptz,
  ADD COLUMN coupons_expire_at timestamptz;

-- A campaign made before was open from its creation.
UPDATE campaigns SET starts_at = created_at WHERE starts_at <> created_at;

ALTER TABLE campaigns
  ADD CONSTRAINT campaigns_ends_after_start CHECK (ends_at > starts_at),
  ADD CONSTRAINT campaigns_coupons_expire_from_start CHECK (coupons_expire_at >= starts_at);

-- A budget change (changeCampaignBudget) locks every lease of its campaign, then every slot; a
-- lease a refill made between the two is not among the locked ones. The statement then writes
-- nothing and says so with the SQLSTATE the runner reruns the transaction on, so that the next
-- attempt locks that lease too.
CREATE FUNCTION campaign_budget_raced() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
    MESSAGE = 'campaign budget change: a lease was made after its leases were locked; run it again';
END
$$;
