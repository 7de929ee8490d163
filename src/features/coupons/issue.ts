import { randomUUID } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Bookkeeping } from '../bookkeeping/bookkeeping.js';
import type { DB } from '../../db/schema.js';
import { SqlState, sqlStateOf } from '../../db/sqlstate.js';
import { AS_TRANSACTION, RollbackAndReturn, type Isolation, type PinConnection, type TransactionSettings } from '../../db/transaction.js';
import { notFound } from '../../core/errors.js';
import { traceparentOf, tracing } from '../../core/tracing.js';
import type { BuiltFor, CampaignShapes } from './budget.js';
import { MAX_BUDGET_SLOTS } from './campaigns.js';
import type { AdmissionTurn, IssueCoalescer } from './coalescer.js';
import type { ClaimValues } from '../idempotency/service.js';
import { ISSUE_REFUSED, statementsFor, type IssueRow, type IssueValues } from './issue-statement.js';
import type { BudgetLeases } from './leases.js';
import { couponStatusOf, type CouponStatusColumns, type CouponWithStatus } from './member-coupons.js';

/**
 * issueCoupon: what an issue is asked and answers, and the product's way of deciding it, one
 * statement (issue-statement.ts) run in its own implicit transaction or inside a transaction, alone
 * or in a batch of its tenant's issues (coalescer.ts).
 */

type IssueStatus = 'ISSUED' | 'ALREADY_ISSUED' | 'NOT_STARTED' | 'ENDED' | 'MONTHLY_CAP' | 'BUDGET_EXCEEDED';

export interface IssueResult {
  status: IssueStatus;
  /** With the status the issue's statement read with it; a stored answer (an idempotent replay's) never carries it. */
  coupon: CouponWithStatus | null;
}

export interface IssueRequest {
  tenantId: string;
  memberId: string;
  campaignId: string;
  /** Of business months: the coupon's month is its issue time's there (the database's clock, period.ts). */
  timeZone: string;
}

/** What an issue is handed besides its request: the request's deadline and its admission turn. */
export interface IssueNeeds {
  /** Epoch ms. */
  deadline: number;
  /** Given back while the issue waits for a batch (coalescer.ts). */
  turn: AdmissionTurn;
}

/**
 * What issueCoupon's audit row names: the coupon and its campaign, or the campaign asked for when none was issued.
 *
 * @example issueEntities(result, { tenantId, memberId, campaignId, timeZone }) // [couponId, campaignId]
 */
export const issueEntities = (result: IssueResult, request: IssueRequest): string[] =>
  result.coupon ? [result.coupon.id, result.coupon.campaignId] : [request.campaignId];

/**
 * How issueCoupon decides, as runMutation calls it. The server runs ConditionalIssuer; the naive
 * twin and the benchmark's peer designs (naive, SERIALIZABLE, advisory locks) implement this in
 * test/ and are handed to buildServices in its place. They leave the bookkeeping to runMutation
 * (`claimsKey` unset).
 */
export interface CouponIssuer {
  name: string;
  isolation?: Isolation;
  /** The first statement of `issue` carries the Idempotency-Key claim. */
  claimsKey?: boolean;
  /** The issue inside a transaction. */
  readonly issue: (
    trx: Transaction<DB>,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    needs: IssueNeeds,
  ) => Promise<IssueResult>;
  /** The issue as one statement in its own implicit transaction, tried before `issue` (runInOneStatement). */
  readonly issueInOneStatement?: (
    pin: PinConnection,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    needs: IssueNeeds,
  ) => Promise<IssueResult | typeof AS_TRANSACTION>;
}

/** This process's parts an issue runs with. */
export interface IssueParts {
  /** The session timeouts the statement checks are in force. */
  timeouts: Pick<TransactionSettings, 'lockTimeoutMs' | 'statementTimeoutMs'>;
  leases: Pick<BudgetLeases, 'holder' | 'issued' | 'leasing'>;
  shapes: CampaignShapes;
  /** Batches the tenant's concurrent one-statement issues; null: each issue is a statement of its own. */
  coalescer: IssueCoalescer | null;
  /** Told each time a one-statement issue met a race and runs again (SQLSTATE 40001, for a metric). */
  onRace: () => void;
}

type Refusal = 'NOT_STARTED' | 'ENDED' | 'MONTHLY_CAP' | 'BUDGET_EXCEEDED';

const refusal = (status: Refusal) => new RollbackAndReturn<IssueResult>({ status, coupon: null });

/** The statement ran into a concurrent write (a budget row gone full while it waited, a double tap): it rolled back whole and may run again. */
const isRacedIssue = (error: unknown): boolean => sqlStateOf(error) === SqlState.serializationFailure;

/**
 * The product's issue (docs/design.md §4): one statement, in its own implicit transaction for
 * every common outcome, and inside a transaction when that cannot run (timeouts not in force, too
 * little of the deadline left) or after contention. The statement is the same both ways, so both
 * take from the same rows: slots, the budget row and leases.
 *
 * @example const issuer = new ConditionalIssuer({ timeouts, leases, shapes, coalescer, onRace }); await issuer.issue(trx, request, bookkeeping, needs)
 */
export class ConditionalIssuer implements CouponIssuer {
  readonly name = 'conditional updates';
  readonly claimsKey = true;

  constructor(private readonly parts: IssueParts) {}

  /**
   * The issue between BEGIN, which sets the timeouts capped by the deadline, and COMMIT. A race
   * (SQLSTATE 40001) rolls the transaction back and the runner runs it again, as for any
   * contention, within TRANSACTION_MAX_ATTEMPTS and the deadline: what outlasts them is TRY_AGAIN,
   * never BUDGET_EXCEEDED.
   *
   * @example await issuer.issue(trx, { tenantId, memberId, campaignId, timeZone }, bookkeeping, needs)
   */
  readonly issue = async (trx: Transaction<DB>, request: IssueRequest, bookkeeping: Bookkeeping<IssueResult>): Promise<IssueResult> => {
    const result = await this.runStatement(trx, request, bookkeeping);
    // BEGIN set both timeouts for this transaction, within what the statement checks for.
    if (result === AS_TRANSACTION) throw new Error('issueCoupon: the transaction runs without the timeouts its BEGIN set');
    return result;
  };

  /**
   * The issue as one statement in its own implicit transaction: ISSUED, ALREADY_ISSUED and every
   * refusal in one round trip, keyed or not, the budget row held for the rest of the statement and
   * its commit only. With a coalescer, an issue that meets others of its tenant runs in one
   * statement with them. AS_TRANSACTION when the transaction must run instead.
   *
   * @example await issuer.issueInOneStatement(pin, { tenantId, memberId, campaignId, timeZone }, bookkeeping, { deadline, turn })
   */
  readonly issueInOneStatement = async (
    pin: PinConnection,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    needs: IssueNeeds,
  ): Promise<IssueResult | typeof AS_TRANSACTION> => {
    const alone = () => pin((db) => this.issueAlone(db, request, bookkeeping, needs.deadline));
    const { coalescer } = this.parts;
    if (!coalescer) return alone();
    const { tenantId, campaignId } = request;
    const member = { values: this.valuesOf(request, bookkeeping), claim: bookkeeping.claim };
    const outcome = await coalescer.issue({ pin, tenantId, campaignId, member, turn: needs.turn }, alone);
    return 'row' in outcome ? this.resultOfRow(outcome.row, request, bookkeeping) : outcome.ran;
  };

  /**
   * One issue in a statement of its own. A statement that met a race (the budget row it waited
   * for went full while another row may still have room, or a double tap committed the coupon)
   * rolled back whole and runs again at once on a fresh snapshot: each race is another issue's
   * progress, and no count of them refuses while a row has room; only the deadline ends them.
   */
  private async issueAlone(
    db: Kysely<DB>,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    deadline: number,
  ): Promise<IssueResult | typeof AS_TRANSACTION> {
    const { lockTimeoutMs, statementTimeoutMs } = this.parts.timeouts;
    for (;;) {
      try {
        return await this.runStatement(db, request, bookkeeping);
      } catch (error) {
        if (!isRacedIssue(error)) throw error;
        this.parts.onRace();
        // The session's timeouts cannot be capped by the deadline; the transaction caps its own.
        if (deadline - Date.now() < Math.max(lockTimeoutMs, statementTimeoutMs)) return AS_TRANSACTION;
      }
    }
  }

  /**
   * Runs the issue's statement once on `executor`: the connection of a one-statement issue, or a
   * transaction. ISSUED and ALREADY_ISSUED are returned; a refusal is a RollbackAndReturn (nothing
   * written; keyed, in one statement: its claim, committed expired); a key another request holds
   * throws KeyHeldElsewhere (bookkeeping.claimed); a race throws the statement's SQLSTATE 40001;
   * AS_TRANSACTION when the session lacks the timeouts.
   *
   * @example await issuer.runStatement(db, { tenantId, memberId, campaignId, timeZone }, bookkeeping)
   */
  async runStatement(
    executor: Kysely<DB> | Transaction<DB>,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
  ): Promise<IssueResult | typeof AS_TRANSACTION> {
    const { shapes, leases } = this.parts;
    const values = this.valuesOf(request, bookkeeping);
    const statements = statementsFor(leases.leasing);
    const run = async (shape: BuiltFor): Promise<IssueRow> => {
      const statement = statements[shape];
      try {
        const row = (await statement[bookkeeping.claim ? 'keyed' : 'plain'].execute(executor, values)).rows[0]!;
        shapes.learnFrom(request, row);
        return row;
      } catch (error) {
        if (sqlStateOf(error) !== ISSUE_REFUSED) throw error;
        const outcome = (error as Error).message;
        if (outcome === 'MONTHLY_CAP' || outcome === 'BUDGET_EXCEEDED') throw refusal(outcome);
        throw error;
      }
    };
    let row = await run(shapes.get(request.tenantId, request.campaignId) ?? 'any');
    // It wrote nothing: the campaign is not of the shape this process knew it by (learned again now).
    if (row.outcome === 'OTHER_SHAPE') row = await run('any');
    if (row.outcome === 'OTHER_SHAPE') throw new Error('issueCoupon: the statement built for any campaign answered OTHER_SHAPE');
    return this.resultOfRow(row, request, bookkeeping);
  }

  /**
   * The values of one issue's statement (and of its member in a batch, issue-batch.ts), made in the
   * request's own context; with a key, its claim's values too, for the keyed statement.
   *
   * @example issuer.valuesOf({ tenantId, memberId, campaignId, timeZone }, bookkeeping).couponId
   */
  valuesOf(request: IssueRequest, bookkeeping: Bookkeeping<IssueResult>): IssueValues & Partial<ClaimValues> {
    const { tenantId, memberId, campaignId, timeZone } = request;
    const { timeouts, leases } = this.parts;
    return {
      tenantId,
      campaignId,
      memberId,
      timeZone,
      couponId: randomUUID(),
      lockTimeoutMs: timeouts.lockTimeoutMs,
      statementTimeoutMs: timeouts.statementTimeoutMs,
      leaseHolder: leases.holder,
      spread: Math.floor(Math.random() * MAX_BUDGET_SLOTS),
      traceparent: tracing.enabled ? traceparentOf() : null,
      // With a key, the claim's values, then the audit row's (both name the mutation as their operation). Spread
      // in this one literal: spread over the finished object afterwards, they made V8 copy it slowly (5 µs an issue).
      ...bookkeeping.claim,
      ...bookkeeping.finishInStatement(),
    };
  }

  /**
   * The result of an issue's row, the same for one statement and for a member of a batch: ISSUED
   * and ALREADY_ISSUED are returned, a refusal is thrown as a RollbackAndReturn, a key another
   * request holds as KeyHeldElsewhere (bookkeeping.claimed), a missing campaign as NOT_FOUND.
   */
  private resultOfRow(row: IssueRow, request: IssueRequest, bookkeeping: Bookkeeping<IssueResult>): IssueResult | typeof AS_TRANSACTION {
    switch (row.outcome) {
      case 'AS_TRANSACTION':
        return AS_TRANSACTION;
      case 'KEY_HELD':
        return bookkeeping.claimed(false) as never;
      case 'NOT_FOUND':
        throw notFound('Campaign');
      case 'OTHER_SHAPE':
        throw new Error('issueCoupon: an issue answered OTHER_SHAPE where it must not');
      case 'NOT_STARTED':
      case 'ENDED':
      case 'MONTHLY_CAP':
      case 'BUDGET_EXCEEDED':
        throw refusal(row.outcome);
      case 'ALREADY_ISSUED':
      case 'ISSUE':
        return this.issued(row, request);
    }
  }

  /** An issued or already-issued coupon's result; an issue from a lease tells the leases, which top it up when it runs low. */
  private issued(row: IssueRow, { tenantId, campaignId }: IssueRequest): IssueResult {
    if (row.outcome === 'ISSUE' && row.budget_lease_coupons) {
      this.parts.leases.issued({ tenantId, campaignId, leaseCoupons: row.budget_lease_coupons, ownLeft: row.own_lease_left });
    }
    return {
      status: row.outcome === 'ISSUE' ? 'ISSUED' : 'ALREADY_ISSUED',
      coupon: {
        id: row.id!,
        campaignId: row.campaign_id!,
        memberId: row.member_id!,
        month: row.month!,
        amountYen: row.amount_yen!,
        issuedAt: row.issued_at!,
        expiresAt: row.expires_at,
        status: couponStatusOf(row as IssueRow & CouponStatusColumns),
      },
    };
  }
}
