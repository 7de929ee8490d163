import { tryAgain, type AppError } from '../core/errors.js';
import type { Session } from '../features/identity/session.js';
import { TokenBuckets } from './token-buckets.js';

export interface AdmissionOptions {
  /** Operations executing at once (MAX_IN_FLIGHT). */
  capacity: number;
  /** Operations of one tenant waiting for a turn (TENANT_QUEUE_MAX); beyond it the longest line of the tenant is shed. */
  queueMax: number;
  /** The longest wait for a turn (DB_POOL_ACQUIRE_TIMEOUT_MS: a turn stands for a connection). */
  maxWaitMs: number;
  /** What callers without a session get: a small share of their own. */
  anonymous: AnonymousShare;
}

/** The share of callers without a session (docs/design.md §8). */
interface AnonymousShare {
  /** Their operations executing at once, together (ANONYMOUS_MAX_IN_FLIGHT). */
  maxInFlight: number;
  /** Their operations waiting, together (ANONYMOUS_QUEUE_MAX). */
  queueMax: number;
  /** Operations per second one client address may start (ANONYMOUS_RATE), and its burst (ANONYMOUS_BURST). */
  rate: number;
  burst: number;
}

export interface AdmissionStats {
  inFlight: number;
  queued: number;
}

/**
 * Whose turn an operation takes: a group that shares the server's turns with the other groups (a
 * tenant, the platform operator, or the callers without a session), and a member who shares the
 * group's turns with the group's other members.
 */
export interface AdmissionKey {
  group: string;
  member: string;
}

export type Admitted = { ok: true; release: () => void } | { ok: false; error: AppError };

/** Turns for GraphQL operations: who runs now, who waits, who is turned away. */
export interface Admission {
  admit(key: AdmissionKey, signal: AbortSignal, deadline: number): Admitted | Promise<Admitted>;
  stats(): AdmissionStats;
}

interface Waiter {
  grant: () => void;
  shed: (error: AppError) => void;
}

/** A group's waiting members, in rotation order (insertion order: a member served goes to the back). */
interface Group {
  members: Map<string, Waiter[]>;
  queued: number;
}

/** Until the first operations finish, the service time is assumed to be this (ms). */
const INITIAL_SERVICE_MS = 20;
/** Weight of the newest service time in the moving average. */
const SERVICE_EWMA_WEIGHT = 0.1;

/** The group of every caller without a session; its members are client addresses. */
const ANONYMOUS_GROUP = 'anonymous';

/**
 * Fair admission of GraphQL operations, at two levels. At most `capacity` operations execute at
 * once; each holds at most one pool connection at a time (see runRead), so together they never
 * queue for the pool. Beyond that, operations wait by group (a tenant, the platform operator, the
 * anonymous callers) and inside a group by member (a member, the tenant's admin, a client address),
 * each member in a line of their own. A freed turn goes to the groups with waiters in rotation, and
 * inside the group to its members in rotation: a tenant flooding the server waits behind its own
 * requests, and so does a member flooding their tenant, while everyone else's next request takes
 * one of the very next turns.
 *
 * A group with `queueMax` operations waiting sheds the member holding the most of it first (its
 * operations executing and waiting): the newest waiter of that member makes room for a newcomer
 * who holds less, and a newcomer who holds as much is refused. Either way the one shed gets
 * TRY_AGAIN with a Retry-After from its own backlog. Nobody waits longer than `maxWaitMs` or past
 * the request's deadline.
 *
 * Callers without a session share one group with a smaller waiting room and at most
 * `anonymous.maxInFlight` turns at once, and each client address starts at most
 * `anonymous.rate` operations a second (burst `anonymous.burst`; beyond it an operation waits in
 * the room for its token), so what they send is parsed and validated in a small share of the
 * server and never ahead of anyone with a session.
 *
 * Work-conserving otherwise: a tenant, or a member, alone may use every turn.
 */
export class FairAdmission implements Admission {
  private inFlight = 0;
  private anonymousInFlight = 0;
  /** Callers without a session waiting for their address's next token. */
  private anonymousPaced = 0;
  /** Groups with waiters; insertion order is the rotation: a group served goes to the back. */
  private readonly groups = new Map<string, Group>();
  /** Operations executing, by member (runningKey); members with none are not kept. */
  private readonly running = new Map<string, number>();
  private readonly anonymousRate: TokenBuckets;
  private serviceMs = INITIAL_SERVICE_MS;

  constructor(private readonly options: AdmissionOptions) {
    this.anonymousRate = new TokenBuckets(options.anonymous.rate, options.anonymous.burst);
  }

  stats(): AdmissionStats {
    // Callers without a session waiting for their address's token are waiting for a turn too.
    let queued = this.anonymousPaced;
    for (const group of this.groups.values()) queued += group.queued;
    return { inFlight: this.inFlight, queued };
  }

  admit(key: AdmissionKey, signal: AbortSignal, deadline: number): Admitted | Promise<Admitted> {
    return key.group === ANONYMOUS_GROUP ? this.paceAnonymous(key, signal, deadline) : this.enter(key, false, signal, deadline);
  }

  /**
   * A caller without a session over its address's rate waits for its token, in the anonymous
   * group's waiting room: a closed loop of requests is slowed to the rate rather than answered
   * as fast as it can send. When the room is full, or the token would come too late, TRY_AGAIN.
   */
  private paceAnonymous(key: AdmissionKey, signal: AbortSignal, deadline: number): Admitted | Promise<Admitted> {
    const waiting = this.anonymousPaced + (this.groups.get(ANONYMOUS_GROUP)?.queued ?? 0);
    const maxWaitMs = waiting < this.options.anonymous.queueMax ? Math.min(this.options.maxWaitMs, deadline - Date.now()) : 0;
    const { reserved, waitMs } = this.anonymousRate.reserve(key.member, maxWaitMs);
    if (!reserved) {
      const message = 'Too many requests without a session from this address; resend later';
      return { ok: false, error: tryAgain(message, { reason: 'rate', retryAfterMs: waitMs }) };
    }
    if (waitMs === 0) return this.enter(key, true, signal, deadline);
    this.anonymousPaced++;
    return new Promise<Admitted>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        this.anonymousPaced--;
      };
      const onAbort = () => {
        done();
        resolve({ ok: false, error: tryAgain('The client closed the request', { reason: 'cancelled', retryAfterMs: 0 }) });
      };
      const timer = setTimeout(() => {
        done();
        resolve(this.enter(key, true, signal, deadline));
      }, waitMs);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** A turn at once when one is free (no promise: the common case costs nothing more), else a wait in the member's line. */
  private enter(key: AdmissionKey, anonymous: boolean, signal: AbortSignal, deadline: number): Admitted | Promise<Admitted> {
    if (this.groups.size === 0 && this.hasTurnFor(anonymous)) return this.start(key, anonymous);
    const group = this.groups.get(key.group) ?? { members: new Map<string, Waiter[]>(), queued: 0 };
    const line = group.members.get(key.member) ?? [];
    if (group.queued >= (anonymous ? this.options.anonymous.queueMax : this.options.queueMax)) {
      const heaviest = this.heaviestLine(key.group, group);
      // Shed whoever holds more of the group than the newcomer would after waiting: the flooder.
      if (heaviest === undefined || heaviest.weight < this.weightOf(key, line) + 2) {
        return { ok: false, error: this.busy(line.length, 'shed', 'Too many of your requests are waiting; resend later') };
      }
      heaviest.line.at(-1)!.shed(this.busy(heaviest.line.length, 'shed', 'Too many of your requests are waiting; resend later'));
    }
    const waitMs = Math.min(this.options.maxWaitMs, deadline - Date.now());
    return new Promise<Admitted>((resolve) => {
      const leave = (outcome: Admitted) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const giveUp = (error: AppError) => {
        this.remove(key, waiter);
        leave({ ok: false, error });
      };
      const waiter: Waiter = { grant: () => leave(this.start(key, anonymous)), shed: giveUp };
      const onAbort = () => giveUp(tryAgain('The client closed the request', { reason: 'cancelled', retryAfterMs: 0 }));
      const timer = setTimeout(
        () =>
          giveUp(
            this.busy(this.groups.get(key.group)?.members.get(key.member)?.length ?? 0, 'busy', 'The server is busy; resend the request'),
          ),
        Math.max(0, waitMs),
      );
      signal.addEventListener('abort', onAbort, { once: true });
      line.push(waiter);
      group.queued++;
      group.members.set(key.member, line);
      this.groups.set(key.group, group);
      // Turns may be free while the anonymous group waits at its own cap: hand them out now.
      this.grantNext();
    });
  }

  /** What a member holds of its group: its operations executing and waiting. */
  private weightOf(key: AdmissionKey, line: Waiter[]): number {
    return (this.running.get(runningKey(key)) ?? 0) + line.length;
  }

  /** The waiting line of the member of `group` that holds the most of it. */
  private heaviestLine(groupName: string, group: Group): { line: Waiter[]; weight: number } | undefined {
    let heaviest: { line: Waiter[]; weight: number } | undefined;
    for (const [member, line] of group.members) {
      const weight = this.weightOf({ group: groupName, member }, line);
      if (heaviest === undefined || weight > heaviest.weight) heaviest = { line, weight };
    }
    return heaviest;
  }

  private hasTurnFor(anonymous: boolean): boolean {
    return this.inFlight < this.options.capacity && (!anonymous || this.anonymousInFlight < this.options.anonymous.maxInFlight);
  }

  private start(key: AdmissionKey, anonymous: boolean): Admitted {
    this.inFlight++;
    if (anonymous) this.anonymousInFlight++;
    const member = runningKey(key);
    this.running.set(member, (this.running.get(member) ?? 0) + 1);
    const started = performance.now();
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.inFlight--;
        if (anonymous) this.anonymousInFlight--;
        const left = this.running.get(member)! - 1;
        if (left === 0) this.running.delete(member);
        else this.running.set(member, left);
        this.serviceMs += SERVICE_EWMA_WEIGHT * (performance.now() - started - this.serviceMs);
        this.grantNext();
      },
    };
  }

  /**
   * The next turn goes to the first group in the rotation that may take one, and inside it to the
   * member at the front of its rotation; both then move to the back.
   */
  private grantNext(): void {
    while (this.inFlight < this.options.capacity) {
      const next = this.nextGroup();
      if (next === undefined) return;
      const [name, group] = next;
      const [member, line] = group.members.entries().next().value as [string, Waiter[]];
      const waiter = line.shift()!;
      group.queued--;
      group.members.delete(member);
      if (line.length > 0) group.members.set(member, line);
      this.groups.delete(name);
      if (group.queued > 0) this.groups.set(name, group);
      waiter.grant();
    }
  }

  private nextGroup(): [string, Group] | undefined {
    for (const entry of this.groups) {
      if (this.hasTurnFor(entry[0] === ANONYMOUS_GROUP)) return entry;
    }
    return undefined;
  }

  private remove(key: AdmissionKey, waiter: Waiter): void {
    const group = this.groups.get(key.group);
    const line = group?.members.get(key.member);
    if (!group || !line) return;
    const index = line.indexOf(waiter);
    if (index < 0) return;
    line.splice(index, 1);
    group.queued--;
    if (line.length === 0) group.members.delete(key.member);
    if (group.queued === 0) this.groups.delete(key.group);
  }

  /** A backlog drains at about `capacity` operations per service time. */
  private busy(backlog: number, reason: string, message: string): AppError {
    const turnsAhead = Math.ceil((backlog + 1) / this.options.capacity);
    return tryAgain(message, { reason, retryAfterMs: turnsAhead * this.serviceMs });
  }
}

const runningKey = (key: AdmissionKey) => `${key.group}\u0000${key.member}`;

/**
 * Whose turn an operation takes: the session's tenant and, inside it, the member (or the tenant's
 * admin); the platform operator; or, without a session, the client's address.
 */
export function admissionKey(session: Session | null, clientAddress: string): AdmissionKey {
  if (session === null) return { group: ANONYMOUS_GROUP, member: clientAddress };
  if (session.role === 'operator') return { group: 'platform', member: session.userId ?? 'operator' };
  return { group: `tenant:${session.tenantId}`, member: `${session.role}:${session.userId ?? ''}` };
}

/** How the server admits operations (a stand-in of buildServices); the fairness tests stand a first-come line in for it. */
export type AdmissionPolicy = (options: AdmissionOptions) => Admission;

export const fairAdmission: AdmissionPolicy = (options) => new FairAdmission(options);
