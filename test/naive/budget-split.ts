import type { BudgetSplit } from '../../src/features/coupons/campaigns.js';

/**
 * The budget split as first drawn: the yen as evenly as whole yen allow (the first rows take the
 * remainder), whatever a coupon costs. Each slot then keeps a remainder smaller than a coupon, so
 * a campaign whose budget does not divide evenly over its slots refuses BUDGET_EXCEEDED while the
 * remainders together could still pay for coupons: 3,000 yen over 8 slots at 100 a coupon sells
 * out at 2,400.
 */
export const evenYenSplit: BudgetSplit = (budgetYen, _discountYen, slots) => {
  const base = Math.floor(budgetYen / slots);
  return Array.from({ length: slots }, (_, slot) => base + (slot < budgetYen % slots ? 1 : 0));
};
