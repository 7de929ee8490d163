import type { RootPool } from '../db/database.js';
import type { Session } from '../identity/session.js';
import type { Logger } from '../logger.js';
import type { AppServices } from '../services.js';

export type { AppServices };

/** One per GraphQL request. */
export interface Context {
  services: AppServices;
  /** The root pool, for the runners (runRead, runMutation); a unit of work uses its `trx`, never this. */
  pool: RootPool;
  session: Session | null;
  requestId: string;
  /** Epoch ms after which the request gives up (REQUEST_DEADLINE_MS after it arrived). */
  deadline: number;
  /** Aborted when the client goes away: no further SQL is issued for it. */
  signal: AbortSignal;
  /** The request's database turns, one at a time (see runRead). */
  turns: <T>(turn: () => Promise<T>) => Promise<T>;
  log: Logger;
  /** The raw Idempotency-Key header, checked when a mutation executes. */
  idempotencyKeyHeader: string | null;
  /** Set for a mutation sent with a valid Idempotency-Key. */
  idempotency: { key: string; fingerprint: string } | null;
}
