import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { expect } from 'vitest';
import { CreateCampaignDocument } from '../generated/graphql.js';
import { LoadClient, runLanes, runReleasedTogether } from '../load/client.js';
import { replyOutcome } from '../load/scenario.js';
import { checkCouponInvariants, headerSessions, sendIssue, setupCouponScenario, type CouponScenario } from '../load/scenarios/coupons.js';
import { startServerProcess, type ServerProcess } from '../load/target.js';
import { withoutRoleTimeouts } from './coupon-run.js';
import { asTenantAdmin, createTenant, gqlOk, type TestBackend } from './harness.js';

export interface LeaseRunResult {
  /** Coupons in the table: what was issued, whatever the killed process answered. */
  coupons: number;
  /** Yen of the budget nobody issued. */
  unissuedYen: number;
  violations: string[];
  /** The budget row's leased yen against the leases' own: they must always agree. */
  leasedYen: { budgetRow: number; leases: number };
  /** BUDGET_EXCEEDED answers the surviving process gave. */
  refusals: number;
  /** Coupons the killed process had issued before it was killed. */
  issuedByKilled: number;
}

const DISCOUNT_YEN = 100;
const BUDGET_COUPONS = 100;
const LEASE_COUPONS = 20;
/** Renewed every third of it: short, so that the test meets the expired lease soon after the kill. */
const LEASE_TTL_MS = 1_500;

async function until<T>(what: string, probe: () => Promise<T | null>, limitMs = 60_000): Promise<T> {
  for (const started = Date.now(); Date.now() - started < limitMs;) {
    const found = await probe();
    if (found !== null) return found;
    await sleep(50);
  }
  throw new Error(`gave up waiting for ${what}`);
}

export interface LeaseRunOptions {
  /** Both processes' sessions lack the role's timeouts (withoutRoleTimeouts): every issue runs as the transaction. */
  transactionPath?: boolean;
}

/**
 * One campaign with budget leases and two server processes of `strategy` on `databaseUrl`. The
 * first serves a stream of issues until it holds a lease with yen left in it, and is killed with
 * SIGKILL in the middle of that stream (its lease is neither given back nor renewed). Once the lease
 * has expired, the second serves twice as many members as the budget has coupons, released together.
 * Counted in SQL afterwards.
 */
export async function runKilledLeaseHolder(
  databaseUrl: string,
  sql: pg.Pool,
  strategy: string,
  runId: string,
  options: LeaseRunOptions = {},
): Promise<LeaseRunResult> {
  const scenario: CouponScenario = {
    tenantId: `leases-${runId}`,
    capYen: 1_000_000,
    campaigns: [
      { id: 'hot', discountYen: DISCOUNT_YEN, budgetYen: BUDGET_COUPONS * DISCOUNT_YEN, budgetSlots: 1, budgetLeaseCoupons: LEASE_COUPONS },
    ],
    members: [],
    sends: 1,
    expectedIssued: BUDGET_COUPONS,
  };
  const env = {
    DATABASE_URL: options.transactionPath ? withoutRoleTimeouts(databaseUrl) : databaseUrl,
    BENCH_STRATEGY: strategy,
    RUN_WORKERS: 'false',
    BUDGET_LEASE_TTL_MS: String(LEASE_TTL_MS),
  };
  const sessions = headerSessions();
  const servers: ServerProcess[] = [];
  const clients: LoadClient[] = [];
  try {
    const [doomed, survivor] = await Promise.all([
      startServerProcess('test/load/bench-server.ts', env),
      startServerProcess('test/load/bench-server.ts', env),
    ]);
    servers.push(doomed!, survivor!);
    const doomedClient = new LoadClient(doomed!.url, 8);
    const survivorClient = new LoadClient(survivor!.url, 16);
    clients.push(doomedClient, survivorClient);
    await setupCouponScenario(survivorClient, scenario, sessions);

    // The doomed process issues, 8 at a time, until its own lease exists with yen left; then it dies mid-stream.
    const holder = `:${doomed!.child.pid}:`;
    let stop = false;
    const stream = runLanes(
      (index) =>
        stop ? null : () => sendIssue(doomedClient, scenario, sessions, { memberId: `a-${index}`, campaignId: 'hot' }).catch(() => null),
      8,
    );
    await until('a lease of the doomed process with yen left', async () => {
      const lease = await sql.query(
        'select 1 from campaign_budget_leases where tenant_id = $1 and holder like $2 and issued_yen < budget_yen',
        [scenario.tenantId, `%${holder}%`],
      );
      return lease.rowCount ? true : null;
    });
    doomed!.child.kill('SIGKILL');
    stop = true;
    await stream;
    await new Promise<void>((resolve) =>
      doomed!.child.exitCode !== null || doomed!.child.signalCode !== null ? resolve() : doomed!.child.once('close', () => resolve()),
    );
    // A statement the dead process sent may still run, and commit, in its session: PostgreSQL
    // notices a vanished client only when it answers. Count once no session is busy but ours.
    await until("the dead process's statements to end", async () => {
      const busy = await sql.query(
        `select 1 from pg_stat_activity where datname = current_database() and backend_type = 'client backend'
            and pid <> pg_backend_pid() and state <> 'idle'`,
      );
      return busy.rowCount ? null : true;
    });
    const issuedByKilled = (await sql.query('select count(*)::int as n from coupons where tenant_id = $1', [scenario.tenantId])).rows[0]
      .n as number;

    await until("the dead process's lease to expire", async () => {
      const live = await sql.query('select 1 from campaign_budget_leases where tenant_id = $1 and holder like $2 and expires_at > now()', [
        scenario.tenantId,
        `%${holder}%`,
      ]);
      return live.rowCount ? null : true;
    });

    await survivorClient.open();
    const replies = await runReleasedTogether(
      Array.from(
        { length: 2 * BUDGET_COUPONS },
        (_, i) => () => sendIssue(survivorClient, scenario, sessions, { memberId: `b-${i}`, campaignId: 'hot' }).then(replyOutcome),
      ),
      16,
    );
    const coupons = (await sql.query('select count(*)::int as n from coupons where tenant_id = $1', [scenario.tenantId])).rows[0]
      .n as number;
    const invariants = await checkCouponInvariants(sql, { ...scenario, expectedIssued: BUDGET_COUPONS }, coupons);
    const leased = (
      await sql.query<{ budget_row: number; leases: number }>(
        `select (select leased_yen from campaign_budget_slots where tenant_id = $1 and campaign_id = 'hot' and slot = 0) as budget_row,
                (select coalesce(sum(budget_yen), 0)::int from campaign_budget_leases where tenant_id = $1 and campaign_id = 'hot') as leases`,
        [scenario.tenantId],
      )
    ).rows[0]!;
    return {
      coupons,
      unissuedYen: BUDGET_COUPONS * DISCOUNT_YEN - coupons * DISCOUNT_YEN,
      violations: invariants.violations,
      leasedYen: { budgetRow: leased.budget_row, leases: leased.leases },
      refusals: replies.filter((outcome) => outcome === 'BUDGET_EXCEEDED').length,
      issuedByKilled,
    };
  } finally {
    for (const client of clients) client.close();
    for (const server of servers) if (server.child.exitCode === null && server.child.signalCode === null) await server.stop();
  }
}

/** What a run of runKilledLeaseHolder must show: the killed holder issued, and every coupon of the budget was issued, beyond it refused. */
export function expectNothingStranded(result: LeaseRunResult): void {
  expect(result.violations).toEqual([]);
  expect(result.issuedByKilled).toBeGreaterThan(0);
  expect(result.coupons).toBe(BUDGET_COUPONS);
  expect(result.unissuedYen).toBe(0);
  expect(result.refusals).toBe(2 * BUDGET_COUPONS - (BUDGET_COUPONS - result.issuedByKilled));
  expect(result.leasedYen.budgetRow).toBe(result.leasedYen.leases);
}

/** A tenant (cap high enough never to matter) and a campaign of 100-yen coupons with budget leases, through the API. */
export async function createLeasedCampaign(
  backend: TestBackend,
  tenantId: string,
  id: string,
  budgetYen: number,
  budgetLeaseCoupons: number,
) {
  await createTenant(backend, tenantId, 1_000_000);
  await gqlOk(
    backend.app.fetch,
    CreateCampaignDocument,
    { input: { id, name: id, discountYen: DISCOUNT_YEN, budgetYen, budgetLeaseCoupons } },
    asTenantAdmin(tenantId),
  );
}
