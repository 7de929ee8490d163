import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../src/db/migrate.js';
import { MIGRATIONS_DIR } from '../src/db/migration-ledger.js';
import { evenYenSplit } from './naive/budget-split.js';
import { IssueCouponDocument } from './generated/graphql.js';
import { asUser, createEmptyDatabaseUrl, createTestBackend, gql } from './support/harness.js';
import { openToolDatabase } from './support/tool-database.js';

// Migration 016 on a database whose slotted campaigns were split by yen (and partly issued): each
// slot keeps what it issued plus whole coupons of what is left, and the campaign then sells out at
// floor(budgetYen / discountYen) coupons.

const RESPLIT = '016_whole_coupon_slots';
const TENANT = 'resplit';

describe(`migration ${RESPLIT}`, () => {
  let url: string;
  const slotsOf = async (db: ReturnType<typeof openToolDatabase>, campaignId: string) =>
    (
      await db.db
        .selectFrom('campaign_budget_slots')
        .select(['budget_yen', 'issued_yen'])
        .where('tenant_id', '=', TENANT)
        .where('campaign_id', '=', campaignId)
        .orderBy('slot')
        .execute()
    ).map((s) => [s.budget_yen, s.issued_yen]);

  beforeAll(async () => {
    url = await createEmptyDatabaseUrl();
    const before = await mkdtemp(path.join(os.tmpdir(), 'migrations-before-016-'));
    const db = openToolDatabase(url, 'resplit-test');
    try {
      for (const file of await readdir(MIGRATIONS_DIR))
        if (file < RESPLIT) await copyFile(path.join(MIGRATIONS_DIR, file), path.join(before, file));
      await migrate(db.db, before);
      await db.db.insertInto('tenants').values({ id: TENANT, name: TENANT, monthly_cap_yen: 1_000_000 }).execute();
      // Split as it used to be: 3,000 and 3,050 yen over 8 slots at 100 a coupon (375 a slot, and 381 or 382).
      const campaigns = [
        { id: 'issued', budget: 3_000, issued: [300, 300, 0, 100, 300, 0, 0, 200] },
        { id: 'fresh', budget: 3_050, issued: [0, 0, 0, 0, 0, 0, 0, 0] },
        // The same, for the sell-out test to issue on (tests run in any order).
        { id: 'sold', budget: 3_050, issued: [0, 0, 0, 0, 0, 0, 0, 0] },
        { id: 'one-row', budget: 3_050, issued: [1_000] },
      ];
      for (const c of campaigns) {
        await db.db
          .insertInto('campaigns')
          .values({ tenant_id: TENANT, id: c.id, name: c.id, discount_yen: 100, budget_yen: c.budget, budget_slots: c.issued.length })
          .execute();
        await db.db
          .insertInto('campaign_budget_slots')
          .values(
            evenYenSplit(c.budget, 100, c.issued.length).map((budget_yen, slot) => ({
              tenant_id: TENANT,
              campaign_id: c.id,
              slot,
              budget_yen,
              issued_yen: c.issued[slot]!,
            })),
          )
          .execute();
      }
      expect(await slotsOf(db, 'fresh')).toEqual([382, 382, 381, 381, 381, 381, 381, 381].map((b) => [b, 0]));
      expect(await migrate(db.db)).toContain(RESPLIT);
    } finally {
      await db.close();
      await rm(before, { recursive: true, force: true });
    }
  });

  it('gives each slot what it issued plus whole coupons of what is left, slot 0 the yen no coupon can use', async () => {
    const db = openToolDatabase(url, 'resplit-test');
    try {
      // 1,800 yen left in 'issued': 18 coupons, 3 in the first two slots and 2 in the others.
      expect(await slotsOf(db, 'issued')).toEqual([
        [600, 300],
        [600, 300],
        [200, 0],
        [300, 100],
        [500, 300],
        [200, 0],
        [200, 0],
        [400, 200],
      ]);
      // 30 coupons and 50 yen: 4 in the first six slots, 3 in the last two.
      expect(await slotsOf(db, 'fresh')).toEqual([450, 400, 400, 400, 400, 400, 300, 300].map((b) => [b, 0]));
      expect(await slotsOf(db, 'one-row')).toEqual([[3_050, 1_000]]);
    } finally {
      await db.close();
    }
  });

  it('then sells the campaign out at floor(budgetYen / discountYen) coupons', async () => {
    const backend = await createTestBackend({ databaseUrl: url });
    try {
      const statuses = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          gql(backend.app.fetch, IssueCouponDocument, { input: { campaignId: 'sold' } }, asUser(TENANT, `m${i}`)).then(
            (r) => r.body.data?.issueCoupon.status,
          ),
        ),
      );
      expect(statuses.filter((s) => s === 'ISSUED')).toHaveLength(30);
      expect(statuses.filter((s) => s === 'BUDGET_EXCEEDED')).toHaveLength(10);
    } finally {
      await backend.close();
    }
  });
});
