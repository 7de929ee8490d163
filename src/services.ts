import { admissionPolicy, TokenBuckets, type Admission } from './admission.js';
import { systemClock, type Clock } from './clock.js';
import type { AppConfig } from './config.js';
import { BudgetLeases } from './coupons/leases.js';
import type { Database } from './db/database.js';
import type { RootPool } from './db/database.js';
import type { DatabaseHealth } from './db/health.js';
import { defaultBackoff, type TransactionSettings } from './db/transaction.js';
import type { Logger } from './logger.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';

/** Process-wide parts, built once at start-up and shared by every request and background loop. */
export interface AppServices {
  config: AppConfig;
  /**
   * The root pool: reads outside a transaction, and the runner that opens transactions. Inside a
   * unit of work, use the runner's `trx` (the executor rule, docs/design.md §3).
   */
  pool: RootPool;
  /** The background loops' own connections, which requests never take (see Database.background). */
  backgroundPool: RootPool;
  /** The database's health as last checked: what /ready answers from. */
  health: DatabaseHealth;
  log: Logger;
  clock: Clock;
  transactions: TransactionSettings;
  metrics: Metrics;
  /** Turns for GraphQL operations, shared fairly between tenants and between the members of each. */
  admission: Admission;
  /** Each tenant session's mutations per second (MEMBER_WRITE_RATE, MEMBER_WRITE_BURST). */
  writeBudget: TokenBuckets;
  /** This process's budget leases (stopped, and so given back, when the server stops). */
  budgetLeases: BudgetLeases;
}

export function buildServices(config: AppConfig, database: Database, log: Logger, clock: Clock = systemClock): AppServices {
  const admission = admissionPolicy.current({
    capacity: config.edge.maxInFlight,
    queueMax: config.edge.tenantQueueMax,
    maxWaitMs: config.dbPoolAcquireTimeoutMs,
    anonymous: config.edge.anonymous,
  });
  return {
    config,
    pool: database.db,
    backgroundPool: database.background,
    health: database.health,
    log,
    clock,
    admission,
    writeBudget: new TokenBuckets(config.edge.memberWriteRate, config.edge.memberWriteBurst),
    budgetLeases: new BudgetLeases(database.db, config.budgetLeaseTtlMs, log),
    metrics: createMetrics(database.pool.counts, database.db, admission),
    transactions: {
      lockTimeoutMs: config.lockTimeoutMs,
      statementTimeoutMs: config.statementTimeoutMs,
      idleInTransactionTimeoutMs: config.idleInTransactionTimeoutMs,
      maxAttempts: config.transactionMaxAttempts,
      ...defaultBackoff,
    },
  };
}
