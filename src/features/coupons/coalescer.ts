import type { Bookkeeping } from '../bookkeeping/bookkeeping.js';
import { isPrimaryGone, type AS_TRANSACTION, type PinConnection } from '../../db/transaction.js';
import { turnNotBack } from '../../core/errors.js';
import { isBatchShape, runBatch, type BatchMember, type MemberRow } from './issue-batch.js';
import type { IssueRequest, IssueResult } from './issue.js';
import { answerOf, issueValuesOf, learnShape, type IssueBatcher, type IssueContext, type IssueRow } from './issue-statement.js';

type Answer = IssueResult | typeof AS_TRANSACTION;

/**
 * Fewer members than this run alone: a batch's statement does more work per run than one issue's
 * (arrays unnested, every CTE set up for all members), and in the bench a few members a statement
 * cost PostgreSQL more per request than single statements, where eight or nine cost about half
 * (docs/benchmarks.md, batched issues).
 */
export const MIN_BATCH = 4;

/**
 * Statements of one tenant a process runs side by side before an issue waits for a batch: an issue
 * that finds fewer of its line in flight runs at once, alone, so that at everyday rates (a few
 * issues of a tenant at a time in a process) nothing waits; only an issue that finds this many in
 * flight waits, and then for the first of them to end, not for one statement to finish before the
 * next may start (docs/benchmarks.md, batched issues in the model).
 */
export const SIDE_BY_SIDE = 2;

/** How a waiting member's turn came: it leads the next batch, its row was decided in a batch, it runs alone, or the batch's answer was lost. */
type Turn = { kind: 'lead'; batch: Waiting[] } | { kind: 'decided'; row: IssueRow } | { kind: 'alone' } | { kind: 'lost'; error: unknown };

interface Waiting {
  /** Takes its request's connection: a member holds none while it waits. */
  pin: PinConnection;
  request: IssueRequest;
  bookkeeping: Bookkeeping<IssueResult>;
  context: IssueContext;
  /** Its values, made in its own request's context (its trace) when it began to wait; its time is the statement's now(). */
  member: BatchMember;
  turn: (turn: Turn) => void;
}

/**
 * This process's issues per tenant, batched across the tenant's campaigns (docs/design.md §4,
 * "Batched issues"): an issue of a tenant that has fewer than SIDE_BY_SIDE statements in flight
 * here runs at once, alone, as it always did (batching never makes an issue wait while its line
 * has room); one that comes while SIDE_BY_SIDE are in flight waits, and when the first of them
 * ends every issue that waited meanwhile, whatever its campaign, runs as one statement and one
 * commit (issue-batch.ts), on the connection of the first of them, which leads the batch in its
 * own request's context. So a tenant has at most SIDE_BY_SIDE statements in flight from this
 * process (and the members of a batch too small to pay, below), and the busier it is, the more
 * members each statement carries, up to `maxMembers` (COUPON_ISSUE_BATCH_MAX; 1 is no batching).
 * The line is the tenant's, not the campaign's: a shop's sale spreads its requests over a few
 * campaigns, each of which alone would have too few waiting at a time to pay for a batch
 * (docs/benchmarks.md, batched issues).
 *
 * An issue waits for its batch on no pool connection and, given `context.stepOut`, on no admission
 * turn either: neither caps how many can wait, so a batch grows with the load, not with DB_POOL_MAX
 * or MAX_IN_FLIGHT. The leader takes its connection when the batch is handed to it; a member takes
 * its turn again when its answer is decided, and one that gets none back is answered TRY_AGAIN if it
 * still had a statement to send (a decided member answers its row: it has committed).
 *
 * A member whose row the batch did not decide (ALONE), and every member of a batch that failed
 * whole, runs again in a statement of its own on its own connection. A batch whose answer was
 * lost (the connection, the client-side limit) may have committed: each member then fails as a
 * lost one-statement answer does, and only its Idempotency-Key can tell.
 *
 * Only campaigns whose shape this process has learned, and whose budget is slot rows (one or
 * several), are batched; campaigns with leases take from this process's own lease already.
 */
export class IssueCoalescer implements IssueBatcher {
  /** Per tenant with a statement in flight: how many are, and the issues waiting for the first of them to end. */
  private readonly lines = new Map<string, Line>();

  /**
   * Batches run, members they carried, and batches that failed whole (their members ran alone);
   * `sizes[n]`: the times n issues that waited were let go together (n below MIN_BATCH ran alone).
   */
  readonly counts = { batches: 0, members: 0, failed: 0, sizes: [] as number[] };

  constructor(readonly maxMembers: number) {}

  /** Issues on the campaign waiting for its tenant's statements in flight. */
  waiting(tenantId: string, campaignId: string): number {
    return this.lines.get(tenantId)?.waiting.filter((w) => w.request.campaignId === campaignId).length ?? 0;
  }

  /** The tenant's statements in flight from this process (its line's lone issues and batches). */
  inFlight(tenantId: string): number {
    return this.lines.get(tenantId)?.inFlight ?? 0;
  }

  /** The issue, batched with others on its campaign when they meet; `alone` runs it in a statement of its own. */
  async issue(
    pin: PinConnection,
    request: IssueRequest,
    bookkeeping: Bookkeeping<IssueResult>,
    context: IssueContext,
    alone: () => Promise<Answer>,
  ): Promise<Answer> {
    const shape = context.shapes.get(request.tenantId, request.campaignId);
    if (this.maxMembers < 2 || !isBatchShape(shape)) return alone();
    const tenant = request.tenantId;
    const line = this.lineOf(tenant);
    if (line.inFlight < SIDE_BY_SIDE) {
      line.inFlight++;
      try {
        return await alone();
      } finally {
        this.next(tenant);
      }
    }
    const member = { values: issueValuesOf(request, bookkeeping, context), claim: bookkeeping.claim };
    const waitForTurn = () =>
      new Promise<Turn>((resolve) => line.waiting.push({ pin, request, bookkeeping, context, member, turn: resolve }));
    const { value: turn, back } = context.stepOut ? await context.stepOut(waitForTurn) : { value: await waitForTurn(), back: true };
    switch (turn.kind) {
      case 'decided':
        return answerOf(turn.row, request, bookkeeping, context.leases);
      case 'lost':
        throw turn.error;
      case 'alone':
        if (!back) throw turnNotBack();
        return alone();
      case 'lead':
        if (!back) {
          // Without a turn the leader sends nothing: its batch's members run alone, and the line moves on.
          for (const waiting of turn.batch.slice(1)) waiting.turn({ kind: 'alone' });
          this.next(tenant);
          throw turnNotBack();
        }
        return this.lead(tenant, turn.batch, alone);
    }
  }

  private lineOf(tenant: string): Line {
    let line = this.lines.get(tenant);
    if (!line) this.lines.set(tenant, (line = { inFlight: 0, waiting: [] }));
    return line;
  }

  /** A statement of the tenant ended: the issues that waited meanwhile become the next batch, led by the first, in its place. */
  private next(tenant: string): void {
    const line = this.lines.get(tenant)!;
    line.inFlight--;
    if (line.waiting.length === 0) {
      if (line.inFlight === 0) this.lines.delete(tenant);
      return;
    }
    // A member, and a key, at most once a batch (whatever the campaign): its month row and claim are each written once per statement.
    const batch: Waiting[] = [];
    const rest: Waiting[] = [];
    const taken = new Set<string>();
    for (const waiting of line.waiting) {
      const { values, claim } = waiting.member;
      const ids = [
        `m${values.memberId}`,
        ...(claim ? [`k${claim.keyTenantId}\u0000${claim.keyUserId}\u0000${claim.keyRole}\u0000${claim.key}`] : []),
      ];
      if (batch.length < this.maxMembers && ids.every((id) => !taken.has(id))) {
        ids.forEach((id) => taken.add(id));
        batch.push(waiting);
      } else {
        rest.push(waiting);
      }
    }
    line.waiting = rest;
    line.inFlight++;
    this.counts.sizes[batch.length] = (this.counts.sizes[batch.length] ?? 0) + 1;
    batch[0]!.turn({ kind: 'lead', batch });
  }

  /** Runs the batch on the leader's connection (batch[0]), hands each member its turn, and returns the leader's own answer. */
  private async lead(tenant: string, batch: Waiting[], alone: () => Promise<Answer>): Promise<Answer> {
    const [leader] = batch as [Waiting, ...Waiting[]];
    if (batch.length < MIN_BATCH) {
      // Too few to pay for the batch's statement: each runs alone, side by side, and the leader's holds the line.
      for (const waiting of batch) if (waiting !== leader) waiting.turn({ kind: 'alone' });
      try {
        return await alone();
      } finally {
        this.next(tenant);
      }
    }
    // Member order is lock order: every batch takes its members' rows in the same order (and its slots in campaign order).
    const members = [...batch].sort((a, b) => (a.member.values.memberId < b.member.values.memberId ? -1 : 1));
    let rows: MemberRow[];
    this.counts.batches++;
    this.counts.members += batch.length;
    try {
      rows = await leader.pin((db) =>
        runBatch(
          db,
          members.map((m) => m.member),
        ),
      );
    } catch (error) {
      this.next(tenant);
      if (isPrimaryGone(error)) {
        for (const waiting of batch) if (waiting !== leader) waiting.turn({ kind: 'lost', error });
        throw error;
      }
      // The batch failed whole and kept nothing: each member runs alone, as it would have without batching.
      this.counts.failed++;
      leader.context.onRace?.();
      for (const waiting of batch) if (waiting !== leader) waiting.turn({ kind: 'alone' });
      return alone();
    }
    this.next(tenant);
    let own: IssueRow | null = null;
    members.forEach((waiting, i) => {
      learnShape(leader.context.shapes, waiting.request, rows[i]!);
      const row = decided(rows[i]!);
      if (waiting === leader) own = row;
      else waiting.turn(row ? { kind: 'decided', row } : { kind: 'alone' });
    });
    return own ? answerOf(own, leader.request, leader.bookkeeping, leader.context.leases) : alone();
  }
}

/** A tenant's line in this process: its statements in flight, and the issues waiting for the first of them to end. */
interface Line {
  inFlight: number;
  waiting: Waiting[];
}

/** A member's row as one issue's, or null when the batch left the member to a statement of its own (ALONE, or a campaign of another shape). */
function decided(row: MemberRow): IssueRow | null {
  return row.outcome === 'ALONE' || row.outcome === 'OTHER_SHAPE' ? null : { ...row, outcome: row.outcome };
}
