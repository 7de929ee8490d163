import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { asWorkOfItsOwn } from '../../db/transaction-mark.js';
import { inSpan, linksToActiveSpan } from '../../core/tracing.js';
import type { DB } from '../../db/schema.js';
import type { Logger } from '../../core/logger.js';
import { untraced } from '../../core/tracing.js';

/** Which leases an issue may take from, and which a refill and the expiry pass give back (a BudgetLeases constructor argument; test/naive has the stand-in that strands budget). */
export interface BudgetLeasing {
  name: string;
  /** The leases (rows `alias`) an issue of the process named `holder` may take from (src/features/coupons/budget.ts takes its own first). */
  mayTake(alias: string, holder: unknown): RawBuilder<unknown>;
  /** The leases (rows `alias`) given back to the budget row. */
  givenBack(alias: string): RawBuilder<unknown>;
}

/**
 * Any lease (a lease is only yen set aside: any process may issue against it, so a dead or idle
 * one strands nothing); every expired lease is given back.
 */
export const productLeasing: BudgetLeasing = {
  name: 'any lease, own first',
  mayTake: () => sql`true`,
  givenBack: (alias) => sql`${sql.raw(alias)}.expires_at <= now()`,
};

/**
 * The CTEs that give back the campaign's leases that `leasing` gives back, besides `own`'s, which
 * it locks too (a refill tops it up). `locked` locks them all in one scan in the order of their
 * holder, waiting for an issue that holds one (at most a statement, or a transaction's round trip
 * to COMMIT); every statement that locks several lease rows of a campaign locks them in this order,
 * so two of them cannot wait for each other, and none holds the budget row yet. A lease renewed
 * while this waited for it is locked but not given back. `gone` deletes the others, `back` sums what
 * they held and issued.
 */
function givingBack(leasing: BudgetLeasing, tenantId: string, campaignId: string, own: string | null) {
  return sql`locked as (
      select l.holder, ${own === null ? sql`false` : sql`l.holder = ${own}`} as own from campaign_budget_leases l
       where l.tenant_id = ${tenantId} and l.campaign_id = ${campaignId}
         and (${leasing.givenBack('l')}${own === null ? sql`` : sql` or l.holder = ${own}`})
       order by l.holder
         for update of l
    ), gone as (
      delete from campaign_budget_leases l using locked e
       where l.tenant_id = ${tenantId} and l.campaign_id = ${campaignId} and l.holder = e.holder and not e.own
      returning l.budget_yen, l.issued_yen
    ), back as (
      select count(*)::int as leases, coalesce(sum(budget_yen), 0)::int as budget, coalesce(sum(issued_yen), 0)::int as issued from gone
    )`;
}

/** What one expiry pass gave back. */
export interface GivenBack {
  campaigns: number;
  leases: number;
  /** Yen leased out that nobody had issued, back in the budget rows' room. */
  unissuedYen: number;
}

/**
 * Gives every expired lease of up to `limit` campaigns back to its budget row (its issued yen into
 * the row's issued, the rest back to its room): the background loop's pass, so that a killed
 * process's lease returns within a TTL of expiring even while nobody issues on its campaign. One
 * statement per campaign, lease rows locked before the budget row.
 *
 * @example const { campaigns, leases } = await giveBackExpiredLeases(db, productLeasing, 100)
 */
export async function giveBackExpiredLeases(db: Kysely<DB>, leasing: BudgetLeasing, limit: number): Promise<GivenBack> {
  const campaigns = await sql<{ tenant_id: string; campaign_id: string }>`
    select distinct l.tenant_id, l.campaign_id from campaign_budget_leases l where ${leasing.givenBack('l')}
     order by l.tenant_id, l.campaign_id limit ${limit}`.execute(db);
  const given: GivenBack = { campaigns: campaigns.rows.length, leases: 0, unissuedYen: 0 };
  for (const { tenant_id: tenantId, campaign_id: campaignId } of campaigns.rows) {
    const result = await sql<{ leases: number; unissued_yen: number }>`
      with ${givingBack(leasing, tenantId, campaignId, null)}, pool as (
        update campaign_budget_slots s set issued_yen = s.issued_yen + b.issued, leased_yen = s.leased_yen - b.budget
          from back b
         where s.tenant_id = ${tenantId} and s.campaign_id = ${campaignId} and s.slot = 0 and b.leases > 0
        returning 1
      )
      select b.leases, b.budget - b.issued as unissued_yen from back b`.execute(db);
    given.leases += result.rows[0]?.leases ?? 0;
    given.unissuedYen += result.rows[0]?.unissued_yen ?? 0;
  }
  return given;
}

interface LeasedCampaign {
  tenantId: string;
  campaignId: string;
}

/** What an issue against a campaign with leases tells the process's leases. */
export interface LeaseIssue extends LeasedCampaign {
  /** The campaign's lease size, in coupons (`budgetLeaseCoupons`). */
  leaseCoupons: number;
  /** Coupons left in this process's own lease after the issue, or null when the issue took from another row. */
  ownLeft: number | null;
}

/**
 * What a request's issue needs of the process's leases, and all a resolver is handed (see
 * RequestServices): the name the leases are held under, how issues take from them, and the word
 * after an issue that may top the own lease up. Refill, renew and release run on the root pool and
 * belong to the process (the backend stops them), never to a request.
 */
export type IssueLeases = Pick<BudgetLeases, 'holder' | 'leasing' | 'issued'>;

/**
 * This process's budget leases (docs/design.md §4): for a campaign with `budgetLeaseCoupons`, the
 * process takes part of the remaining budget into a row of its own, and its issues take from that
 * row first, so that processes do not queue on one budget row. A lease is only yen set aside: any
 * process may issue against any lease (its own first), so a process that dies or idles strands
 * nothing, and a campaign refuses BUDGET_EXCEEDED only when neither its budget row nor any lease
 * has room. Leases are topped up in the background when the own one runs low, renewed while the
 * process lives, given back when it stops, and once expired given back by any other process's
 * refill and by the background loop (giveBackExpiredLeases). Near the end a lease is at most half
 * of what is left, down to one coupon, and always whole coupons: yen moves between the budget row
 * and leases only in whole coupons, which keeps the campaign's sold-out answer exact.
 *
 * Every change moves yen between the budget row and lease rows in one statement: the budget row
 * keeps `leased_yen` beside `issued_yen` (CHECK issued + leased <= budget) and each lease's issued
 * yen stays within its own (CHECK), so the total never exceeds the budget, whatever crashes.
 * Lock order: lease rows, then the budget row. An issue locks one of them and waits while it holds
 * none (src/features/coupons/budget.ts); a refill, a release and an expiry pass lock the lease rows they
 * change first and the budget row last, and nothing waits for a lease row while it holds a budget
 * row, so no two of them can wait for each other.
 *
 * @example const leases = new BudgetLeases(db, config.coupons.budgetLeaseTtlMs, log, productLeasing)
 */
export class BudgetLeases {
  readonly holder = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  private readonly refills = new Map<string, Promise<void>>();
  /** Campaigns whose budget row had nothing to lease, until when not to ask again. */
  private readonly dryUntil = new Map<string, number>();
  private renewal: NodeJS.Timeout | null = null;
  /** The renewal in flight: release waits for it, since both lock this process's lease rows. */
  private renewing: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly db: Kysely<DB>,
    private readonly ttlMs: number,
    private readonly log: Logger,
    /** How issues take from leases, and which leases a refill gives back. */
    readonly leasing: BudgetLeasing,
  ) {}

  /** After an issue on a campaign with leases: tops the own lease up when it ran below half (in the background). */
  issued(issue: LeaseIssue): void {
    if (issue.ownLeft !== null && issue.ownLeft >= Math.ceil(issue.leaseCoupons / 2)) return;
    const key = `${issue.tenantId}\u0000${issue.campaignId}`;
    if (this.stopped || this.refills.has(key) || (this.dryUntil.get(key) ?? 0) > Date.now()) return;
    // Its own statement on its own connection, after the issue, never inside the issue's; with
    // tracing on, a trace of its own linked to the issue's, which has ended by the time it runs.
    const setOffBy = linksToActiveSpan();
    const refill = asWorkOfItsOwn(() =>
      inSpan(
        'budget lease refill',
        { root: true, attributes: { 'app.campaign.id': issue.campaignId }, ...(setOffBy ? { links: setOffBy } : {}) },
        () => this.refill(issue),
      ),
    )
      .then((granted) => {
        if (granted === 0) this.dryUntil.set(key, Date.now() + this.ttlMs / 3);
      })
      .catch((error: unknown) => this.log.warn({ err: summary(error), campaign: issue.campaignId }, 'budget lease refill failed'))
      .finally(() => this.refills.delete(key));
    this.refills.set(key, refill);
  }

  /**
   * One statement: gives back every expired lease of the campaign but this process's own (its
   * issued yen into the budget row's issued, the rest back to its room), then leases this process
   * up to `leaseCoupons` more (half of what is left when that is less). Lease rows are locked
   * before the budget row, as everywhere: its own and the expired ones (givingBack), then the
   * budget row. Returns the yen granted.
   */
  async refill({ tenantId, campaignId, leaseCoupons }: Omit<LeaseIssue, 'ownLeft'>): Promise<number> {
    const result = await sql<{ granted: number | null }>`
      with ${givingBack(this.leasing, tenantId, campaignId, this.holder)}, pool as (
        select s.budget_yen - s.issued_yen - s.leased_yen as room, c.discount_yen
          from campaign_budget_slots s join campaigns c on c.tenant_id = s.tenant_id and c.id = s.campaign_id
         where s.tenant_id = ${tenantId} and s.campaign_id = ${campaignId} and s.slot = 0 and (select count(*) from locked) >= 0
           for update of s
      ), granted as (
        select p.discount_yen * least(${leaseCoupons}::int, ((p.room + b.budget - b.issued) / p.discount_yen + 1) / 2) as yen
          from pool p, back b
      ), pool_update as (
        update campaign_budget_slots s
           set issued_yen = s.issued_yen + b.issued, leased_yen = s.leased_yen - b.budget + g.yen
          from back b, granted g
         where s.tenant_id = ${tenantId} and s.campaign_id = ${campaignId} and s.slot = 0
        returning g.yen
      ), mine as (
        insert into campaign_budget_leases (tenant_id, campaign_id, holder, budget_yen, expires_at)
        select ${tenantId}, ${campaignId}, ${this.holder}, yen, now() + make_interval(secs => ${this.ttlMs}::int / 1000.0)
          from pool_update where yen > 0
        on conflict (tenant_id, campaign_id, holder) do update
          set budget_yen = campaign_budget_leases.budget_yen + excluded.budget_yen, expires_at = excluded.expires_at
        returning budget_yen
      )
      select (select yen from pool_update) as granted`.execute(this.db);
    const granted = result.rows[0]?.granted ?? 0;
    if (granted > 0) this.renewWhileHeld();
    return granted;
  }

  private renewWhileHeld() {
    if (this.renewal || this.stopped) return;
    this.renewal = setInterval(() => {
      this.renewing ??= this.renew()
        .catch((error: unknown) => this.log.warn({ err: summary(error) }, 'budget lease renewal failed'))
        .finally(() => (this.renewing = null));
    }, this.ttlMs / 3);
    this.renewal.unref();
  }

  /** Keeps this process's leases from expiring. */
  async renew(): Promise<void> {
    await sql`update campaign_budget_leases set expires_at = now() + make_interval(secs => ${this.ttlMs}::int / 1000.0)
               where holder = ${this.holder}`.execute(this.db);
  }

  /** Gives every lease of this process back to its campaign's budget row, in one statement (its lease rows locked first, then the budget rows). */
  async release(): Promise<void> {
    await sql`
      with mine as (
        select l.tenant_id, l.campaign_id from campaign_budget_leases l
         where l.holder = ${this.holder}
         order by l.tenant_id, l.campaign_id
           for update of l
      ), pool as (
        select s.tenant_id, s.campaign_id from campaign_budget_slots s
         where s.slot = 0 and (select count(*) from mine) > 0 and (s.tenant_id, s.campaign_id) in (select tenant_id, campaign_id from mine)
         order by s.tenant_id, s.campaign_id
           for update of s
      ), gone as (
        delete from campaign_budget_leases l using pool
         where l.holder = ${this.holder} and l.tenant_id = pool.tenant_id and l.campaign_id = pool.campaign_id
        returning l.tenant_id, l.campaign_id, l.budget_yen, l.issued_yen
      )
      update campaign_budget_slots s set issued_yen = s.issued_yen + gone.issued_yen, leased_yen = s.leased_yen - gone.budget_yen
        from gone
       where s.tenant_id = gone.tenant_id and s.campaign_id = gone.campaign_id and s.slot = 0`.execute(this.db);
  }

  /** Stops renewing and gives the leases back (a process that is killed instead leaves them to expire). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.renewal) clearInterval(this.renewal);
    await Promise.allSettled([...this.refills.values(), this.renewing]);
    // Shutdown belongs to no request: its statement would be a trace of its own.
    await untraced(() => this.release()).catch((error: unknown) =>
      this.log.warn({ err: summary(error) }, 'budget leases not given back; they expire'),
    );
  }
}

function summary(error: unknown) {
  return error instanceof Error ? { message: error.message, code: (error as { code?: unknown }).code } : { message: String(error) };
}
