import { tryAgain, type AppError } from './errors.js';
import type { Session } from './identity/session.js';
import { Replaceable } from './replaceable.js';

export interface AdmissionOptions {
  /** Operations executing at once (MAX_IN_FLIGHT). */
  capacity: number;
  /** Operations of one tenant waiting for a turn (TENANT_QUEUE_MAX); more are shed at once. */
  queueMax: number;
  /** The longest wait for a turn (DB_POOL_ACQUIRE_TIMEOUT_MS: a turn stands for a connection). */
  maxWaitMs: number;
}

export interface AdmissionStats {
  inFlight: number;
  queued: number;
}

export type Admitted = { ok: true; release: () => void } | { ok: false; error: AppError };

/** Turns for GraphQL operations: who runs now, who waits, who is turned away. */
export interface Admission {
  admit(tenant: string, signal: AbortSignal, deadline: number): Admitted | Promise<Admitted>;
  stats(): AdmissionStats;
}

interface Waiter {
  grant: () => void;
}

/** Until the first operations finish, the service time is assumed to be this (ms). */
const INITIAL_SERVICE_MS = 20;
/** Weight of the newest service time in the moving average. */
const SERVICE_EWMA_WEIGHT = 0.1;

/**
 * Fair admission of GraphQL operations between tenants. At most `capacity` operations execute
 * at once; each holds at most one pool connection at a time (see runRead), so together they
 * never queue for the pool. Beyond that, each tenant waits in its own queue, and a freed turn
 * goes to the tenants with waiters in rotation: a tenant flooding the server waits behind its
 * own requests, while another tenant's next request takes the very next turn. A tenant whose
 * queue is full is shed at once with TRY_AGAIN and a Retry-After from its own backlog; nobody
 * waits longer than `maxWaitMs` or past the request's deadline.
 *
 * Work-conserving: a tenant alone may use every turn.
 */
export class FairAdmission implements Admission {
  private inFlight = 0;
  /** Insertion order is the rotation: a tenant served goes to the back. */
  private readonly queues = new Map<string, Waiter[]>();
  private serviceMs = INITIAL_SERVICE_MS;

  constructor(private readonly options: AdmissionOptions) {}

  stats(): AdmissionStats {
    let queued = 0;
    for (const queue of this.queues.values()) queued += queue.length;
    return { inFlight: this.inFlight, queued };
  }

  /** A turn at once when one is free (no promise: the common case costs nothing more), else a wait in the tenant's queue. */
  admit(tenant: string, signal: AbortSignal, deadline: number): Admitted | Promise<Admitted> {
    if (this.inFlight < this.options.capacity && this.queues.size === 0) return this.start();
    const queue = this.queues.get(tenant) ?? [];
    if (queue.length >= this.options.queueMax) {
      return { ok: false, error: this.busy(queue.length, 'shed', 'Too many requests of this tenant are waiting; resend later') };
    }
    const waitMs = Math.min(this.options.maxWaitMs, deadline - Date.now());
    return new Promise<Admitted>((resolve) => {
      const leave = (outcome: Admitted) => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        resolve(outcome);
      };
      const waiter: Waiter = { grant: () => leave(this.start()) };
      const giveUp = (error: AppError) => {
        this.remove(tenant, waiter);
        leave({ ok: false, error });
      };
      const onAbort = () => giveUp(tryAgain('The client closed the request', { reason: 'cancelled', retryAfterMs: 0 }));
      const timer = setTimeout(
        () => giveUp(this.busy(this.queues.get(tenant)?.length ?? 0, 'busy', 'The server is busy; resend the request')),
        Math.max(0, waitMs),
      );
      signal.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      this.queues.set(tenant, queue);
    });
  }

  private start(): Admitted {
    this.inFlight++;
    const started = performance.now();
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.inFlight--;
        this.serviceMs += SERVICE_EWMA_WEIGHT * (performance.now() - started - this.serviceMs);
        this.grantNext();
      },
    };
  }

  /** The next turn goes to the tenant at the front of the rotation, who then moves to the back. */
  private grantNext(): void {
    while (this.inFlight < this.options.capacity) {
      const next = this.queues.entries().next();
      if (next.done) return;
      const [tenant, queue] = next.value;
      const waiter = queue.shift()!;
      this.queues.delete(tenant);
      if (queue.length > 0) this.queues.set(tenant, queue);
      waiter.grant();
    }
  }

  private remove(tenant: string, waiter: Waiter): void {
    const queue = this.queues.get(tenant);
    if (!queue) return;
    const index = queue.indexOf(waiter);
    if (index >= 0) queue.splice(index, 1);
    if (queue.length === 0) this.queues.delete(tenant);
  }

  /** The tenant's backlog drains at about `capacity` operations per service time. */
  private busy(backlog: number, reason: string, message: string): AppError {
    const turnsAhead = Math.ceil((backlog + 1) / this.options.capacity);
    return tryAgain(message, { reason, retryAfterMs: turnsAhead * this.serviceMs });
  }
}

/** Whose turn an operation takes: the session's tenant, the platform operator, or nobody's. */
export function admissionKey(session: Session | null): string {
  if (session === null) return 'anonymous';
  return session.tenantId === null ? 'platform' : `tenant:${session.tenantId}`;
}

/** How the server admits operations; the fairness test stands a first-come line in for it. */
export const admissionPolicy = new Replaceable<(options: AdmissionOptions) => Admission>((options) => new FairAdmission(options));
