import { fairAdmission, type Admission, type AdmissionPolicy } from './admission.js';
import { TokenBuckets } from './token-buckets.js';
import { systemClock, type Clock } from '../core/clock.js';
import type { AppConfig } from '../core/config.js';
import { documentIssuing, type DocumentIssuing } from '../features/contracts/service.js';
import { budgetChanger, type BudgetChanger } from '../features/coupons/budget-change.js';
import { splitByCoupons, type BudgetSplit } from '../features/coupons/campaigns.js';
import { CampaignShapes } from '../features/coupons/budget.js';
import { IssueCoalescer } from '../features/coupons/coalescer.js';
import { ConditionalIssuer, type CouponIssuer } from '../features/coupons/issue.js';
import { BudgetLeases, productLeasing, type BudgetLeasing } from '../features/coupons/leases.js';
import { Checkout, type CheckoutSteps } from '../features/checkout/checkout.js';
import { PaymentWaitingRoom } from '../features/checkout/waiting.js';
import { couponRedeemer, type CouponRedeemer } from '../features/coupons/redeem.js';
import type { Database } from '../db/database.js';
import type { RootPool } from '../db/database.js';
import type { DatabaseHealth } from '../db/health.js';
import { SqlState } from '../db/sqlstate.js';
import { transactionSettingsOf, type TransactionSettings } from '../db/transaction.js';
import { huddleOperations, type HuddleOperations } from '../features/huddles/service.js';
import { KnownTenants } from '../features/tenants/known-tenants.js';
import type { Logger } from '../core/logger.js';
import { createMetrics, type Metrics } from './metrics/metrics.js';
import type { PaymentProvider } from '../features/payments/provider.js';
import { simulatedProvider } from '../features/payments/simulated.js';
import { stripeProvider } from '../features/payments/stripe.js';

/**
 * What a test or the benchmark builds the services with in place of the product's parts: the naive
 * twins, which a concurrency test must fail against (docs/design.md §10), and the benchmark's peer
 * designs. buildServices hands each to the part that uses it, or makes it a service of its own
 * name; production runs the originals.
 */
export interface StandIns {
  documentIssuing?: DocumentIssuing;
  couponIssuer?: CouponIssuer;
  couponRedeemer?: CouponRedeemer;
  huddleOperations?: HuddleOperations;
  admissionPolicy?: AdmissionPolicy;
  budgetLeasing?: BudgetLeasing;
  checkout?: CheckoutSteps;
  budgetSplit?: BudgetSplit;
  budgetChanger?: BudgetChanger;
}

/**
 * Checkout's payment provider: Stripe with STRIPE_SECRET_KEY; without it the simulated one in
 * development, and none elsewhere (checkout then refuses, and start-up says so).
 */
function paymentProviderOf(config: AppConfig): PaymentProvider | null {
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
  /** The shapes of the campaigns this process issued on (which statement an issue runs). */
  campaignShapes: CampaignShapes;
  /** This process's concurrent issues per tenant, batched into one statement (COUPON_ISSUE_BATCH_MAX). */
  issueCoalescer: IssueCoalescer;
  /** issueCoupon (ConditionalIssuer, src/features/coupons/issue.ts). */
  couponIssuer: CouponIssuer;
  /** redeemCoupon. */
  couponRedeemer: CouponRedeemer;
  /** createContractDocument's numbering. */
  documentIssuing: DocumentIssuing;
  /** The huddle mutations and the worker's cleanup. */
  huddleOperations: HuddleOperations;
  /** How createCampaign splits a budget over its slot rows. */
  budgetSplit: BudgetSplit;
  /** changeCampaignBudget. */
  budgetChanger: BudgetChanger;
  /** checkout, confirmCheckout, refundOrder, Stripe's webhooks and the reconciler (Checkout, src/features/checkout/checkout.ts). */
  checkout: Checkout;
}

/**
 * The process's services, each built once with its parts; `standIns` replace the product's parts
 * by name (the naive twins, the benchmark's peers).
 *
 * @example const services = buildServices(config, database, log, systemClock, { couponIssuer: naiveIssuer })
 */
export function buildServices(
  config: AppConfig,
  database: Database,
  log: Logger,
  clock: Clock = systemClock,
  standIns: StandIns = {},
): AppServices {
  const admission = (standIns.admissionPolicy ?? fairAdmission)({
    capacity: config.edge.maxInFlight,
    queueMax: config.edge.tenantQueueMax,
    maxWaitMs: config.database.poolAcquireTimeoutMs,
    anonymous: config.edge.anonymous,
  });
  const paymentsWaiting = new PaymentWaitingRoom(config.payments.maxWaiting, config.payments.timeoutMs);
  const metrics = createMetrics(
    database.pool.counts,
    database.db,
    admission,
    {
      waiting: () => paymentsWaiting.waiting,
      reconcileForMs: config.payments.reconcileForMs,
    },
    () => issueCoalescer.counts,
  );
  const countRace = () => metrics.transactionRetries.inc({ sqlstate: SqlState.serializationFailure });
  const transactions = transactionSettingsOf(config);
  const budgetLeases = new BudgetLeases(database.db, config.coupons.budgetLeaseTtlMs, log, standIns.budgetLeasing ?? productLeasing);
  const campaignShapes = new CampaignShapes();
  const payments = paymentProviderOf(config);
  const issueCoalescer = new IssueCoalescer(config.coupons.issueBatchMax, campaignShapes, countRace);
  const couponIssuer =
    standIns.couponIssuer ??
    new ConditionalIssuer({
      timeouts: transactions,
      leases: budgetLeases,
      shapes: campaignShapes,
      coalescer: issueCoalescer,
      onRace: countRace,
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
    budgetLeases,
    knownTenants: new KnownTenants(),
    payments,
    campaignShapes,
    issueCoalescer,
    couponIssuer,
    couponRedeemer: standIns.couponRedeemer ?? couponRedeemer,
    documentIssuing: standIns.documentIssuing ?? documentIssuing,
    huddleOperations: standIns.huddleOperations ?? huddleOperations,
    budgetSplit: standIns.budgetSplit ?? splitByCoupons,
    budgetChanger: standIns.budgetChanger ?? budgetChanger,
    checkout: new Checkout(
      {
        provider: payments,
        limits: config.payments,
        clock,
        waiting: paymentsWaiting,
        refused: (source) => metrics.paymentAnswersRefused.inc({ source }),
      },
      standIns.checkout,
    ),
    metrics,
    transactions,
  };
}
