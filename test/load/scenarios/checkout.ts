import { setTimeout as sleep } from 'node:timers/promises';
import { print } from 'graphql';
import type pg from 'pg';
import {
  CheckoutDocument,
  ConfirmCheckoutDocument,
  CreateCampaignDocument,
  CreateTenantDocument,
  IssueCouponDocument,
} from '../../generated/graphql.js';
import { runReleasedTogether, type LoadClient } from '../client.js';
import { replyOutcome, undecided, type InvariantCheck, type LoadScenario } from '../scenario.js';
import type { Session } from './coupons.js';

const CHECKOUT = print(CheckoutDocument);
const CONFIRM_CHECKOUT = print(ConfirmCheckoutDocument);

/**
 * The cards members pay with, as shares of the checkouts; the payment methods are Stripe's test
 * ones, which the simulated provider of a development server knows as well (docs/design.md §11).
 */
export interface CardMix {
  /** `pm_card_visa`: pays. */
  paying: number;
  /** `pm_card_chargeDeclined`: declined; the order is CANCELED and its coupon given back. */
  declined: number;
  /**
   * 3-D Secure cards (`THREE_D_SECURE_CARD`): checkout answers REQUIRES_ACTION and a client
   * secret; the customer authenticates in the browser (the first and every fifth after fail it), and confirmCheckout
   * settles the order: its answer is the one counted.
   */
  threeDSecure: number;
  /** Any other payment method by its share: a provider stub's faults (`pm_card_visa__lost502`). */
  others?: Record<string, number>;
}

/** Most checkouts pay, one in ten asks for 3-D Secure, and one in five is declined (the coupon then comes back). */
export const DEFAULT_CARDS: CardMix = { paying: 0.7, declined: 0.2, threeDSecure: 0.1 };

export const THREE_D_SECURE_CARD = 'pm_card_authenticationRequired';

/** How a customer's browser finishes a 3-D Secure step, given the PaymentIntent's client secret. */
type Authenticate = (clientSecret: string, result: 'succeed' | 'fail') => Promise<void>;

/**
 * The simulated provider's page of a development server (`/dev/authenticate`, what the GraphiQL
 * walkthrough opens), answered as the customer's click would.
 */
function simulatedAuthentication(client: LoadClient): Authenticate {
  return async (clientSecret, result) => {
    const response = await fetch(new URL('/dev/authenticate', client.url), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ client_secret: clientSecret, result }),
    });
    await response.body?.cancel();
    if (!response.ok) throw new Error(`/dev/authenticate answered ${response.status}: the server's payments are not simulated`);
  };
}

export interface CheckoutScenarioOptions {
  /** Members of the tenant, each with one coupon when `withCoupons` says so. */
  members?: number;
  cards?: CardMix;
  /** How long the invariant check waits for the reconciler to settle what is pending. */
  reconcileWaitMs?: number;
  /** How the 3-D Secure cards' customers authenticate; by default the simulated provider's page. */
  authenticate?: Authenticate;
}

const COUPON_YEN = 300;
/** Members by default: at the load tool's 32 connections, none sends near MEMBER_WRITE_RATE (50 a second). */
const DEFAULT_MEMBERS = 120;
/** The reconciler resends after PAYMENTS_RECONCILE_AFTER_MS (60 s by default) and passes every 5 s. */
const DEFAULT_RECONCILE_WAIT_MS = 90_000;

/** The payment method of checkout `index`: the mix's shares laid out over each hundred checkouts. */
export function cardFor(cards: CardMix, index: number): string {
  const shares: [string, number][] = [
    ['pm_card_visa', cards.paying],
    ['pm_card_chargeDeclined', cards.declined],
    [THREE_D_SECURE_CARD, cards.threeDSecure],
    ...Object.entries(cards.others ?? {}),
  ];
  const total = shares.reduce((sum, [, share]) => sum + share, 0);
  // Spread out, not in blocks: checkout i takes the slot of (i * 37) mod 100 of the hundred.
  let slot = (((index * 37) % 100) + 0.5) / 100;
  for (const [method, share] of shares) {
    slot -= share / total;
    if (slot < 0) return method;
  }
  return shares[0]![0];
}

interface CheckoutRequest {
  member: string;
  couponId: string | null;
}

/**
 * Members pay for purchases, with and without coupons. Half the members hold a coupon of the
 * run's campaign; each of them first sends two checkouts with it at once (a double tap: at most
 * one may pay with it), then pays without it, like the other half always does.
 */
export function checkoutScenario(runId: string, total: number | null, options: CheckoutScenarioOptions = {}): LoadScenario {
  const tenantId = `checkout-${runId}`;
  const members = Array.from({ length: options.members ?? DEFAULT_MEMBERS }, (_, i) => `buyer-${i + 1}`);
  const cards = options.cards ?? DEFAULT_CARDS;
  const coupons = new Map<string, string>();
  let authentications = 0;
  const firstRound: string[] = members.flatMap((member, i) => (i % 2 === 0 ? [member, member] : [member]));
  const requestAt = (index: number): CheckoutRequest => {
    if (index < firstRound.length) {
      const member = firstRound[index]!;
      return { member, couponId: coupons.get(member) ?? null };
    }
    return { member: members[(index - firstRound.length) % members.length]!, couponId: null };
  };
  return {
    name: 'checkout',
    setup: (client, sessions) => setupCheckout(client, sessions, tenantId, members, coupons),
    request(index, client, sessions) {
      if (total !== null && index >= total) return null;
      const { member, couponId } = requestAt(index);
      const input = { amountYen: 1_000 + (index % 500), paymentMethod: cardFor(cards, index), ...(couponId ? { couponId } : {}) };
      const session = sessions.member(tenantId, member);
      const authenticate = options.authenticate ?? simulatedAuthentication(client);
      return async () => {
        const reply = await client.graphql(CHECKOUT, { input }, session);
        if (replyOutcome(reply) !== 'REQUIRES_ACTION') return reply;
        const { clientSecret, order } = reply.body.data!['checkout'] as { clientSecret: string; order: { id: string } };
        await authenticate(clientSecret, authentications++ % 5 === 0 ? 'fail' : 'succeed');
        return client.graphql(CONFIRM_CHECKOUT, { input: { orderId: order.id } }, session);
      };
    },
    outcomeOf: replyOutcome,
    check: (sql, outcomes) => checkCheckoutInvariants(sql, tenantId, outcomes, options.reconcileWaitMs ?? DEFAULT_RECONCILE_WAIT_MS),
  };
}

/** The tenant, its campaign, and a coupon for every other member, through the API. */
async function setupCheckout(client: LoadClient, sessions: Session, tenantId: string, members: string[], coupons: Map<string, string>) {
  const must = (reply: Awaited<ReturnType<LoadClient['mutation']>>, what: string) => {
    if (reply.status !== 200 || reply.body.errors?.length)
      throw new Error(`${what} failed: ${JSON.stringify(reply.body.errors ?? reply.status)}`);
    return reply.body.data!;
  };
  must(
    await client.mutation(
      print(CreateTenantDocument),
      { input: { id: tenantId, name: tenantId, monthlyCapYen: 100_000 } },
      sessions.operator,
    ),
    'createTenant',
  );
  const holders = members.filter((_, i) => i % 2 === 0);
  const campaign = { id: 'checkout', name: 'Checkout load', discountYen: COUPON_YEN, budgetYen: COUPON_YEN * Math.max(1, holders.length) };
  must(await client.mutation(print(CreateCampaignDocument), { input: campaign }, sessions.admin(tenantId)), 'createCampaign');
  const issue = print(IssueCouponDocument);
  await runReleasedTogether(
    holders.map((member) => async () => {
      const data = must(
        await client.mutation(issue, { input: { campaignId: 'checkout' } }, sessions.member(tenantId, member)),
        'issueCoupon',
      );
      const coupon = (data['issueCoupon'] as { coupon: { id: string } | null }).coupon;
      if (!coupon) throw new Error(`issueCoupon for ${member} issued nothing`);
      coupons.set(member, coupon.id);
    }),
    8,
  );
}

/** Waits (up to `waitMs`) until the reconciler has settled every pending order of the tenant. */
async function untilSettled(sql: pg.Pool, tenantId: string, waitMs: number): Promise<void> {
  for (const until = Date.now() + waitMs; Date.now() < until; await sleep(250)) {
    const { rows } = await sql.query<{ n: number }>(
      `select ((select count(*) from orders where tenant_id = $1 and status = 'PENDING_PAYMENT')
            + (select count(*) from coupons where tenant_id = $1 and held_by_order_id is not null))::int as n`,
      [tenantId],
    );
    if (rows[0]!.n === 0) return;
  }
}

/**
 * Checkout's invariants counted in SQL (docs/design.md §1, §11) once the reconciler has had its
 * time: a PAID order has exactly one succeeded charge (none when the coupon covered the price) and
 * a CANCELED one none; a coupon pays at most one order and is redeemed when it did; nothing is left
 * PENDING_PAYMENT or HELD; as many PAID orders as PAID answers, plus any whose answer was lost.
 */
export async function checkCheckoutInvariants(
  sql: pg.Pool,
  tenantId: string,
  outcomes: Record<string, number>,
  reconcileWaitMs: number,
): Promise<InvariantCheck[]> {
  await untilSettled(sql, tenantId, reconcileWaitMs);
  const count = async (text: string) => (await sql.query<{ n: number }>(text, [tenantId])).rows[0]!.n;
  const paid = await count("select count(*)::int as n from orders where tenant_id = $1 and status = 'PAID'");
  const canceled = await count("select count(*)::int as n from orders where tenant_id = $1 and status = 'CANCELED'");
  const paidWithoutOneCharge = await count(`select count(*)::int as n from orders o
      left join payment_intents p on p.tenant_id = o.tenant_id and p.order_id = o.id and p.status = 'succeeded'
     where o.tenant_id = $1 and o.status = 'PAID'
       and (case when o.charged_yen > 0 then p.order_id is null or p.provider_intent_id is distinct from o.payment_intent_id else p.order_id is not null end)`);
  const chargedNotPaid =
    await count(`select count(*)::int as n from payment_intents p join orders o on o.tenant_id = p.tenant_id and o.id = p.order_id
     where p.tenant_id = $1 and p.status = 'succeeded' and o.status <> 'PAID'`);
  const couponsTwice = await count(`select count(*)::int as n from (select coupon_id from orders
     where tenant_id = $1 and status = 'PAID' and coupon_id is not null group by coupon_id having count(*) > 1) d`);
  const paidCouponNotRedeemed =
    await count(`select count(*)::int as n from orders o join coupons c on c.tenant_id = o.tenant_id and c.id = o.coupon_id
     where o.tenant_id = $1 and o.status = 'PAID' and c.redeemed_at is null`);
  const pending = await count("select count(*)::int as n from orders where tenant_id = $1 and status = 'PENDING_PAYMENT'");
  const held = await count('select count(*)::int as n from coupons where tenant_id = $1 and held_by_order_id is not null');
  const paidAnswers = outcomes['PAID'] ?? 0;
  const unknown = undecided(outcomes) + (outcomes['PENDING'] ?? 0);
  return [
    {
      invariant: 'each PAID order has exactly one charge, each CANCELED order none',
      counted: `${paid} PAID orders, ${paidWithoutOneCharge} without exactly one succeeded charge; ${canceled} CANCELED, ${chargedNotPaid} charges of orders not PAID`,
      violations: [
        ...(paidWithoutOneCharge > 0 ? [`${paidWithoutOneCharge} PAID orders without exactly one succeeded charge of their intent`] : []),
        ...(chargedNotPaid > 0 ? [`${chargedNotPaid} succeeded charges of orders that are not PAID`] : []),
      ],
    },
    {
      invariant: 'each coupon pays at most one order, and is redeemed when it did',
      counted: `${couponsTwice} coupons paying two orders, ${paidCouponNotRedeemed} paying coupons not redeemed`,
      violations: [
        ...(couponsTwice > 0 ? [`${couponsTwice} coupons pay more than one PAID order`] : []),
        ...(paidCouponNotRedeemed > 0 ? [`${paidCouponNotRedeemed} coupons of PAID orders are not redeemed`] : []),
      ],
    },
    {
      invariant: 'nothing left pending after the reconciler',
      counted: `${pending} orders PENDING_PAYMENT, ${held} coupons HELD, after waiting up to ${(reconcileWaitMs / 1000).toFixed(0)} s`,
      violations: [
        ...(pending > 0 ? [`${pending} orders still PENDING_PAYMENT`] : []),
        ...(held > 0 ? [`${held} coupons still HELD`] : []),
      ],
    },
    {
      invariant: 'one PAID order per PAID answer',
      counted: `${paid} PAID orders for ${paidAnswers} PAID answers${unknown > 0 ? ` and ${unknown} PENDING or unknown` : ''}`,
      violations:
        paid >= paidAnswers && paid <= paidAnswers + unknown
          ? []
          : [`${paid} PAID orders for ${paidAnswers} PAID answers${unknown > 0 ? ` (and ${unknown} PENDING or unknown)` : ''}`],
    },
  ];
}
