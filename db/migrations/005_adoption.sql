-- Room for data adopted from systems that had the races (npm run db:adopt). Nothing is deleted:
-- damaged rows stay, marked, and the invariants guard every write from then on.

-- Contracts that existed only as a document's contract_id.
ALTER TABLE contracts ADD COLUMN adopted boolean NOT NULL DEFAULT false;

-- Legacy documents that share a number keep it; all but the earliest are marked, and uniqueness
-- holds for every other row (new numbers come after the highest legacy one).
ALTER TABLE contract_documents ADD COLUMN legacy_duplicate_number boolean NOT NULL DEFAULT false;
ALTER TABLE contract_documents DROP CONSTRAINT contract_documents_number_unique;
CREATE UNIQUE INDEX contract_documents_number_unique ON contract_documents (tenant_id, doc_number)
  WHERE NOT legacy_duplicate_number;

-- Coupons: adopted rows are marked; extra coupons of one member in one campaign stay as legacy
-- duplicates (voided unless already redeemed), and one-per-member holds for every other row.
ALTER TABLE coupons
  ADD COLUMN adopted boolean NOT NULL DEFAULT false,
  ADD COLUMN legacy_duplicate boolean NOT NULL DEFAULT false,
  ADD COLUMN redeemed_at timestamptz,
  ADD COLUMN voided_at timestamptz;
DROP INDEX coupons_one_per_member;
CREATE UNIQUE INDEX coupons_one_per_member ON coupons (tenant_id, campaign_id, member_id) WHERE NOT legacy_duplicate;

-- How far over budget a campaign already was when it was adopted: reconciliation reports that
-- much as legacy, anything beyond it as drift.
ALTER TABLE campaigns ADD COLUMN adopted_overspend_yen integer NOT NULL DEFAULT 0 CHECK (adopted_overspend_yen >= 0);

CREATE TABLE adoptions (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  tenant_id   text NOT NULL,
  adopted_at  timestamptz NOT NULL DEFAULT now(),
  report      jsonb NOT NULL
);
