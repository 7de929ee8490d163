import type { Kysely } from 'kysely';
import type { AppConfig } from '../config.js';
import type { Clock } from '../clock.js';
import type { CouponIssuer } from '../coupons/service.js';
import type { DB } from '../db/schema.js';
import type { TransactionSettings } from '../db/transaction.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Session } from '../identity/session.js';
import type { FairAdmission } from '../http/admission.js';

/** Process-wide parts, built once in main and shared by every request. */
export interface AppServices {
  config: AppConfig;
  db: Kysely<DB>;
  log: Logger;
  clock: Clock;
  transactions: TransactionSettings;
  metrics: Metrics;
  couponIssuer: CouponIssuer;
  /** Turns for GraphQL operations, shared fairly between tenants. */
  admission: FairAdmission;
}

/** One per GraphQL request. */
export interface Context {
  services: AppServices;
  /** The root Kysely instance: reads outside a transaction. Inside a mutation, use the runner's trx. */
  db: Kysely<DB>;
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
