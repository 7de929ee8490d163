-- Budget leases (docs/design.md §4): a process takes part of a campaign's remaining budget into a
-- row of its own and issues against it, so that processes do not meet on one budget row. The
-- budget row keeps what is leased out; whatever crashes, its issued and leased yen stay within the
-- budget, and each lease issues no more than it holds: the total never exceeds the budget.
ALTER TABLE campaigns
  ADD COLUMN budget_lease_coupons integer NOT NULL DEFAULT 0 CHECK (budget_lease_coupons BETWEEN 0 AND 10000);

ALTER TABLE campaign_budget_slots
  ADD COLUMN leased_yen integer NOT NULL DEFAULT 0 CHECK (leased_yen >= 0),
  -- With nothing leased out, campaign_budget_slots_within_budget is the check (adoption re-adds it NOT
  -- VALID for a campaign it found overspent); this one covers the row while yen is leased out.
  ADD CONSTRAINT campaign_budget_slots_leased_within_budget CHECK (leased_yen = 0 OR issued_yen + leased_yen <= budget_yen);

CREATE TABLE campaign_budget_leases (
  tenant_id   text NOT NULL,
  campaign_id text NOT NULL,
  -- The process that took it (host, pid and a random part); any process may issue against it.
  holder      text NOT NULL CHECK (char_length(holder) BETWEEN 1 AND 200),
  budget_yen  integer NOT NULL CHECK (budget_yen > 0),
  issued_yen  integer NOT NULL DEFAULT 0 CHECK (issued_yen >= 0),
  -- Renewed by its holder while it lives; after it, any process may give the lease back.
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (tenant_id, campaign_id, holder),
  FOREIGN KEY (tenant_id, campaign_id) REFERENCES campaigns (tenant_id, id),
  CONSTRAINT campaign_budget_leases_within_lease CHECK (issued_yen <= budget_yen)
);
