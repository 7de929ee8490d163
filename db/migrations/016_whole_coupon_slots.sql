-- Every coupon the budget can pay for (docs/design.md §4).
--
-- An issue that waited for a budget row (a slot, the budget row or a lease) and found its room gone
-- while it waited rolls back whole and runs again on a fresh snapshot, where another row may have
-- room. Inside a transaction that is a rerun of the transaction, so the statement says it with the
-- SQLSTATE the runner reruns on: serialization_failure, what REPEATABLE READ raises for the same
-- meeting with a concurrent update.
CREATE FUNCTION coupon_issue_raced() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
    MESSAGE = 'coupon issue: the budget row it waited for had no room left; run it again on a fresh snapshot';
END
$$;

-- Budget slots used to split the yen evenly, so each slot kept a remainder smaller than a coupon
-- and a sold-out campaign left up to budget_slots x discount_yen unissued. Each slot of a campaign
-- with several now holds what it issued plus a whole number of coupons (the campaign's coupons left
-- spread as evenly as whole coupons allow, the first slots taking one more), and slot 0 keeps the
-- yen no coupon can use. The slots are locked first, so an issue running meanwhile either commits
-- before this reads its row or waits and then sees the new budget. A campaign already over its budget
-- (adopted) is left as it is.
WITH locked AS (
  SELECT s.tenant_id, s.campaign_id, s.slot, s.budget_yen, s.issued_yen, c.discount_yen
    FROM campaign_budget_slots s
    JOIN campaigns c ON c.tenant_id = s.tenant_id AND c.id = s.campaign_id
   WHERE c.budget_slots > 1
   ORDER BY s.tenant_id, s.campaign_id, s.slot
     FOR UPDATE OF s
), campaign AS (
  SELECT tenant_id, campaign_id, discount_yen, count(*)::int AS slots,
         (sum(budget_yen) - sum(issued_yen))::int AS left_yen
    FROM locked
   GROUP BY tenant_id, campaign_id, discount_yen
  HAVING bool_and(issued_yen <= budget_yen)
), ranked AS (
  SELECT l.tenant_id, l.campaign_id, l.slot, l.issued_yen, c.discount_yen, c.slots, c.left_yen,
         row_number() OVER (PARTITION BY l.tenant_id, l.campaign_id ORDER BY l.slot) - 1 AS rank
    FROM locked l JOIN campaign c ON c.tenant_id = l.tenant_id AND c.campaign_id = l.campaign_id
), resplit AS (
  SELECT tenant_id, campaign_id, slot,
         issued_yen
         + discount_yen * ((left_yen / discount_yen) / slots + CASE WHEN rank < (left_yen / discount_yen) % slots THEN 1 ELSE 0 END)
         + CASE WHEN rank = 0 THEN left_yen % discount_yen ELSE 0 END AS budget_yen
    FROM ranked
)
UPDATE campaign_budget_slots s SET budget_yen = r.budget_yen
  FROM resplit r
 WHERE s.tenant_id = r.tenant_id AND s.campaign_id = r.campaign_id AND s.slot = r.slot AND s.budget_yen <> r.budget_yen;
