import { isPrimaryGone, type PinConnection } from '../../db/transaction.js';
import { turnNotBack } from '../../core/errors.js';
import type { CampaignShapes } from './budget.js';
import { isBatchShape, runBatch, type BatchMember, type MemberRow } from './issue-batch.js';
import type { IssueRow } from './issue-statement.js';

/**
 * Fewer members than this run alone: a batch's statement does more work per run than one issue's
 * (arrays unnested, every CTE set up for all members), and in the bench a few members a statement
 * cost PostgreSQL more per request than single statements, where eight or nine cost about half
 * (docs/benchmarks.md, batched issues).
 */
export const MIN_BATCH = 4;

/**
 * Statements of one tenant a process runs side by side before an issue waits for a batch: an issue
 * that finds fewer of its line in flight runs at once, alone, so that an issue that finds its line
 * idle never waits; one that finds this many in flight waits for the first of them to end. One: a
 * tenant's statements take the same campaigns' budget rows, so a second one in flight mostly waits
 * for the first's locks anyway, and two batches side by side split what waited in two and race for
 * the same rows. Measured with real processes (docs/benchmarks.md, "One statement of a tenant in
 * flight"): against two, 1.2x to 1.3x the batched req/s and half the PostgreSQL CPU per request
 * at 32 clients, about the same at 8, and a lower p99 at 500 issues a second on the open model; the
 * model's pick of two did not hold.
 */
export const SIDE_BY_SIDE = 1;

/**
 * The request's admission turn (docs/design.md §8), given back while an issue waits for a batch
 * and taken again after: `back` is false when none came back.
 */
export interface AdmissionTurn {
  stepOut<T>(wait: () => Promise<T>): Promise<{ value: T; back: boolean }>;
}

/** One issue offered to its tenant's line. */
export interface LineIssue {
  /** Takes its request's connection: a member holds none while it waits. */
  pin: PinConnection;
  tenantId: string;
  campaignId: string;
  /** Its statement's values, made in its own request's context (its trace); its time is the statement's now(). */
  member: BatchMember;
  /** Its request's admission turn, given back while it waits. */
  turn: AdmissionTurn;
}

/** What the line did with an issue: its row, decided in a batch, or what `alone` answered when it ran in a statement of its own. */
export type Coalesced<A> = { row: IssueRow } | { ran: A };

/** What the line tells a waiting issue: it leads the next batch, its row was decided in a batch, it runs alone, or the batch's answer was lost. */
type LineWord =
  { kind: 'lead'; batch: Waiting[] } | { kind: 'decided'; row: IssueRow } | { kind: 'alone' } | { kind: 'lost'; error: unknown };

interface Waiting {
  issue: LineIssue;
  tell: (word: LineWord) => void;
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
 * An issue waits for its batch on no pool connection and, stepping out of its admission turn, on
 * no turn either: neither caps how many can wait, so a batch grows with the load, not with DB_POOL_MAX
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
 *
 * @example const coalescer = new IssueCoalescer(config.coupons.issueBatchMax, shapes, countRace)
 */
export class IssueCoalescer {
  /** Per tenant with a statement in flight: how many are, and the issues waiting for the first of them to end. */
  private readonly lines = new Map<string, Line>();

  /**
   * Batches run, members they carried, and batches that failed whole (their members ran alone);
   * `sizes[n]`: the times n issues that waited were let go together (n below MIN_BATCH ran alone).
   */
  readonly counts = { batches: 0, members: 0, failed: 0, sizes: [] as number[] };

  /**
   * @param maxMembers COUPON_ISSUE_BATCH_MAX: the most issues one statement carries (1: no batching).
   * @param shapes The shapes this process learned: only campaigns of a batch shape are batched.
   * @param onFailedBatch Told when a batch failed whole and its members run alone (counted as a race).
   */
  constructor(
    readonly maxMembers: number,
    private readonly shapes: CampaignShapes,
    private readonly onFailedBatch: () => void = () => {},
  ) {}

  /** Whether an issue on the campaign may meet others in a batch: batching is on, and the campaign's shape is known and batchable. */
  private batches(tenantId: string, campaignId: string): boolean {
    return this.maxMembers >= 2 && isBatchShape(this.shapes.get(tenantId, campaignId));
  }

  /** Issues on the campaign waiting for its tenant's statements in flight. */
  waiting(tenantId: string, campaignId: string): number {
    return this.lines.get(tenantId)?.waiting.filter((w) => w.issue.campaignId === campaignId).length ?? 0;
  }

  /** The tenant's statements in flight from this process (its line's lone issues and batches). */
  inFlight(tenantId: string): number {
    return this.lines.get(tenantId)?.inFlight ?? 0;
  }

  /**
   * Runs the issue in its tenant's line: `alone()` at once while the line has room, else in the
   * next batch, whose row for it comes back (or `alone()`'s answer when the batch left it out).
   *
   * @example const outcome = await coalescer.issue({ pin, tenantId, campaignId, member, turn }, () => issueAlone())
   */
  async issue<A>(issue: LineIssue, alone: () => Promise<A>): Promise<Coalesced<A>> {
    if (!this.batches(issue.tenantId, issue.campaignId)) return { ran: await alone() };
    const tenant = issue.tenantId;
    const line = this.lineOf(tenant);
    if (line.inFlight < SIDE_BY_SIDE) {
      line.inFlight++;
      try {
        return { ran: await alone() };
      } finally {
        this.next(tenant);
      }
    }
    const waitForWord = () => new Promise<LineWord>((resolve) => line.waiting.push({ issue, tell: resolve }));
    const { value: word, back } = await issue.turn.stepOut(waitForWord);
    switch (word.kind) {
      case 'decided':
        return { row: word.row };
      case 'lost':
        throw word.error;
      case 'alone':
        if (!back) throw turnNotBack();
        return { ran: await alone() };
      case 'lead':
        if (!back) {
          // Without a turn the leader sends nothing: its batch's members run alone, and the line moves on.
          for (const waiting of word.batch.slice(1)) waiting.tell({ kind: 'alone' });
          this.next(tenant);
          throw turnNotBack();
        }
        return this.lead(tenant, word.batch, alone);
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
      const { values, claim } = waiting.issue.member;
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
    batch[0]!.tell({ kind: 'lead', batch });
  }

  /** Runs the batch on the leader's connection (batch[0]), tells each member its row or to run alone, and returns the leader's own answer. */
  private async lead<A>(tenant: string, batch: Waiting[], alone: () => Promise<A>): Promise<Coalesced<A>> {
    const [leader] = batch as [Waiting, ...Waiting[]];
    if (batch.length < MIN_BATCH) {
      // Too few to pay for the batch's statement: each runs alone, side by side, and the leader's holds the line.
      for (const waiting of batch) if (waiting !== leader) waiting.tell({ kind: 'alone' });
      try {
        return { ran: await alone() };
      } finally {
        this.next(tenant);
      }
    }
    // Member order is lock order: every batch takes its members' rows in the same order (and its slots in campaign order).
    const members = [...batch].sort((a, b) => (a.issue.member.values.memberId < b.issue.member.values.memberId ? -1 : 1));
    let rows: MemberRow[];
    this.counts.batches++;
    this.counts.members += batch.length;
    try {
      rows = await leader.issue.pin((db) =>
        runBatch(
          db,
          members.map((m) => m.issue.member),
        ),
      );
    } catch (error) {
      this.next(tenant);
      if (isPrimaryGone(error)) {
        for (const waiting of batch) if (waiting !== leader) waiting.tell({ kind: 'lost', error });
        throw error;
      }
      // The batch failed whole and kept nothing: each member runs alone, as it would have without batching.
      this.counts.failed++;
      this.onFailedBatch();
      for (const waiting of batch) if (waiting !== leader) waiting.tell({ kind: 'alone' });
      return { ran: await alone() };
    }
    this.next(tenant);
    let own: IssueRow | null = null;
    members.forEach((waiting, i) => {
      this.shapes.learnFrom(waiting.issue, rows[i]!);
      const row = decided(rows[i]!);
      if (waiting === leader) own = row;
      else waiting.tell(row ? { kind: 'decided', row } : { kind: 'alone' });
    });
    return own ? { row: own } : { ran: await alone() };
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
