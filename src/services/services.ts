import { fairAdmission, type Admission, type AdmissionPolicy } from './admission.js';
import { TokenBuckets } from './token-buckets.js';
import { systemClock, type Clock } from '../core/clock.js';
import type { AppConfig } from '../core/config.js';
import { documentIssuing, type DocumentIssuing } from '../features/contracts/service.js';
import { budgetChanger, type BudgetChanger } from '../features/coupons/budget-change.js';
import { splitByCoupons, type BudgetSplit } from '../features/coupons/campaigns.js';
import { IssueCoalescer } from '../features/coupons/coalescer.js';
import { CampaignShapes } from '../features/coupons/issue-statement.js';
import { BudgetLeases, productLeasing, type BudgetLeasing } from '../features/coupons/leases.js';
import { splitCheckout, type CheckoutAlgorithm } from '../features/checkout/flow.js';
import { PaymentWaitingRoom } from '../features/checkout/waiting.js';
import { couponRedeemer, type CouponRedeemer } from '../features/coupons/redeem.js';
import { conditionalUpdates, type CouponIssuer } from '../features/coupons/issuer.js';
import type { Database } from '../db/database.js';
import type { RootPool } from '../db/database.js';
import type { DatabaseHealth } from '../db/health.js';
import { transactionSettingsOf, type TransactionSettings } from '../db/transaction.js';
import { huddleOperations, type HuddleOperations } from '../features/huddles/service.js';
import { KnownTenants } from '../features/tenants/known-tenants.js';
import type { Logger } from '../core/logger.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import type { PaymentProvider } from '../features/payments/provider.js';
import { simulatedProvider } from '../features/payments/simulated.js';
import { stripeProvider } from '../features/payments/stripe.js';

/**
 * The algorithms a test or the benchmark may stand another design in for: the naive twins, which a
 * concurrency test must fail against (docs/design.md §10), and the benchmark's peers. Production
 * runs the originals; every caller, the background loops included, takes them from here.
 */
export interface Algorithms {
  documentIssuing: DocumentIssuing;
  couponIssuer: CouponIssuer;
  couponRedeemer: CouponRedeemer;
  huddleOperations: HuddleOperations;
  admissionPolicy: AdmissionPolicy;
  budgetLeasing: BudgetLeasing;
  checkout: CheckoutAlgorithm;
  budgetSplit: BudgetSplit;
  budgetChanger: BudgetChanger;
}

export const ORIGINAL_ALGORITHMS: Algorithms = {
  documentIssuing,
  couponIssuer: conditionalUpdates,
  couponRedeemer,
  huddleOperations,
  admissionPolicy: fairAdmission,
  budgetLeasing: productLeasing,
  checkout: splitCheckout,
  budgetSplit: splitByCoupons,
  budgetChanger,
};

/**
 * Checkout's payment provider: Stripe with STRIPE_SECRET_KEY; without it the simulated one in
 * development, and none elsewhere (checkout then refuses, and start-up says so).
 */
export function paymentProviderOf(config: AppConfig): PaymentProvider | null {
  const { secretKey, apiUrl } = config.payments;
  if (secretKey !== null) return stripeProvider({ secretKey, apiUrl });
  return config.process.development ? simulatedProvider() : null;
}

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
  /** The tenants this database was seen to hold (the guards' lookup, src/graphql/guards.ts). */
  knownTenants: KnownTenants;
  /** Checkout's payment provider; null when none is configured (production without STRIPE_SECRET_KEY). */
  payments: PaymentProvider | null;
  /** Checkouts waiting on the provider, bounded by PAYMENTS_MAX_WAITING. */
  paymentsWaiting: PaymentWaitingRoom;
  /** The shapes of the campaigns this process issued on (which statement an issue runs). */
  campaignShapes: CampaignShapes;
  /** This process's concurrent issues per campaign, batched into one statement (COUPON_ISSUE_BATCH_MAX). */
  issueCoalescer: IssueCoalescer;
  algorithms: Algorithms;
}

/** `standIns`: the algorithms a test or the benchmark puts in place of the originals. */
export function buildServices(
  config: AppConfig,
  database: Database,
  log: Logger,
  clock: Clock = systemClock,
  standIns: Partial<Algorithms> = {},
): AppServices {
  const algorithms = { ...ORIGINAL_ALGORITHMS, ...standIns };
  const admission = algorithms.admissionPolicy({
    capacity: config.edge.maxInFlight,
    queueMax: config.edge.tenantQueueMax,
    maxWaitMs: config.database.poolAcquireTimeoutMs,
    anonymous: config.edge.anonymous,
  });
  const paymentsWaiting = new PaymentWaitingRoom(config.payments.maxWaiting, config.payments.timeoutMs);
  const issueCoalescer = new IssueCoalescer(config.coupons.issueBatchMax);
  return {
    config,
    pool: database.db,
    backgroundPool: database.background,
    health: database.health,
    log,
    clock,
    admission,
    writeBudget: new TokenBuckets(config.edge.memberWriteRate, config.edge.memberWriteBurst),
    budgetLeases: new BudgetLeases(database.db, config.coupons.budgetLeaseTtlMs, log, algorithms.budgetLeasing),
    knownTenants: new KnownTenants(),
    payments: paymentProviderOf(config),
    paymentsWaiting,
    campaignShapes: new CampaignShapes(),
    issueCoalescer,
    algorithms,
    metrics: createMetrics(
      database.pool.counts,
      database.db,
      admission,
      {
        waiting: () => paymentsWaiting.waiting,
        reconcileForMs: config.payments.reconcileForMs,
      },
      () => issueCoalescer.counts,
    ),
    transactions: transactionSettingsOf(config),
  };
}
