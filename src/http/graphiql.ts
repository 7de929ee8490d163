import { isDevMode, type AppConfig } from '../core/config.js';

/** The demo member of db/seed, so a first visit to GraphiQL can run a mutation at once. */
export const DEMO_HEADERS = {
  'x-hasura-role': 'user',
  'x-hasura-tenant-id': 'acme',
  'x-hasura-user-id': 'member-1',
} as const;

/** acme's first contract in db/seed/demo.sql: step 2 of the walkthrough runs with it. */
export const DEMO_CONTRACT_ID = '11111111-1111-4111-8111-111111111111';

/** Where the walkthrough's ConfirmCheckout takes the order id CheckoutWith3DS answered. */
const ORDER_ID_PLACEHOLDER = 'paste the order id from CheckoutWith3DS';

const DEFAULT_QUERY = `# Headers (below) act as the demo member of tenant "acme". Put the cursor in an
# operation and press Ctrl+Enter (or pick it from the run button's list); each
# step says what to look for.

# 1. The tenant's contracts and their documents.
query ListContracts {
  viewer { role tenantId userId }
  contracts(first: 5) { id title documents { docNumber } }
}

# 2. Variables (below) names the first contract; paste another id from step 1
#    to number that one. The next number comes back.
mutation CreateDocument($contractId: UUID!) {
  createContractDocument(input: { contractId: $contractId }) {
    document { id contractId docNumber createdAt }
  }
}

# 3. Run it twice: ISSUED, then ALREADY_ISSUED with the same coupon.
mutation IssueWelcome {
  issueCoupon(input: { campaignId: "welcome" }) {
    status
    coupon { id campaignId month amountYen issuedAt status }
  }
}

# 4. 1,800 yen paid with Stripe's test card pm_card_visa (the server's banner
#    says which provider pays). Add couponId: "<the coupon's id from step 3>"
#    to take it off the price, or try pm_card_chargeDeclined. MyOrders lists
#    what you bought, newest first.
mutation Checkout {
  checkout(input: { amountYen: 1800, paymentMethod: "pm_card_visa" }) {
    status
    order { id status amountYen discountYen dueYen paidYen couponId paymentIntentId createdAt }
  }
}

query MyOrders {
  orders(first: 5) { id status amountYen dueYen paidYen refundedYen failureCode createdAt }
}

# 5. 3-D Secure, as Japanese card payments ask for it: REQUIRES_ACTION and a
#    clientSecret. Open /dev/authenticate?client_secret=<the clientSecret> on
#    this server (in a browser, Stripe.js's handleNextAction shows the card
#    issuer's page) and complete or fail it. Then put the order's id in
#    Variables (orderId) and run ConfirmCheckout: PAID, or DECLINED with a
#    failureCode.
mutation CheckoutWith3DS {
  checkout(input: { amountYen: 2400, paymentMethod: "pm_card_threeDSecure2Required" }) {
    status
    clientSecret
    order { id status dueYen paidYen }
  }
}

mutation ConfirmCheckout($orderId: UUID!) {
  confirmCheckout(input: { orderId: $orderId }) {
    status
    order { id status dueYen paidYen failureCode paymentIntentId }
  }
}

# 6. Campaigns run for a period, on the database's clock: ENDED (the Silver
#    Week ran 2026-09-19 to 09-23), NOT_STARTED (it opens a week after the demo
#    data was loaded). MyCoupons shows each coupon's expiresAt and status
#    (EXPIRED once its expiresAt has passed).
mutation IssueSilverWeek {
  issueCoupon(input: { campaignId: "sw-a" }) { status coupon { id expiresAt } }
}

mutation IssueWinter {
  issueCoupon(input: { campaignId: "winter-sale" }) { status coupon { id expiresAt } }
}

query MyCoupons {
  myCoupons(first: 5) { campaignId amountYen issuedAt expiresAt status }
  campaign(id: "winter-sale") { startsAt endsAt couponsExpireAt }
}

# 7. With acme's admin in Headers ({"x-hasura-role": "admin",
#    "x-hasura-tenant-id": "acme"}): CHANGED, or BELOW_ISSUED under what
#    members already hold.
mutation ChangeBudget {
  changeCampaignBudget(input: { campaignId: "welcome", budgetYen: 150000 }) {
    status
    campaign { budgetYen issuedYen remainingYen }
  }
}
`;

export function graphiqlOptions(config: AppConfig) {
  if (!config.process.development) return false;
  return {
    title: 'Mutation backend',
    defaultQuery: DEFAULT_QUERY,
    // The Variables pane of a first visit: CreateDocument runs as it stands; ConfirmCheckout once orderId is pasted.
    variables: JSON.stringify({ contractId: DEMO_CONTRACT_ID, orderId: ORDER_ID_PLACEHOLDER }, null, 2),
    // Only dev mode trusts these headers; with a secret or JWT configured the caller brings their own.
    headers: isDevMode(config) ? JSON.stringify(DEMO_HEADERS, null, 2) : undefined,
    shouldPersistHeaders: false,
  };
}
