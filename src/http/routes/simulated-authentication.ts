import type { AppServices } from '../../services/services.js';
import type { SimulatedProvider } from '../../features/payments/simulated.js';
import type { Route } from './route.js';

/** Where a person finishes or fails the simulated provider's 3-D Secure step, in development. */
const SIMULATED_AUTHENTICATION_PATH = '/dev/authenticate';

const CLIENT_SECRET = /^pi_sim_[0-9a-f]{24}_secret_[0-9a-f]{24}$/;

const html = (status: number, body: string) =>
  new Response(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Simulated 3-D Secure</title></head>` +
      `<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">${body}</body></html>`,
    { status, headers: { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' } },
  );

/** The answer for a client secret no payment waits on: none given (the page opened by hand), or one already settled. */
function noPaymentWaits(clientSecret: string): string {
  return clientSecret === ''
    ? `<h1>Which payment?</h1><p>Open this page as checkout's answer names it: <code>${SIMULATED_AUTHENTICATION_PATH}?client_secret=</code> ` +
        `followed by the <code>clientSecret</code> of a checkout that answered <code>REQUIRES_ACTION</code>.</p>`
    : '<h1>No payment waits for this client secret</h1><p>It was finished, or never asked.</p>';
}

/** The page a card issuer would show: the payment, and a button for each outcome. */
function challengePage(clientSecret: string, amountYen: number): Response {
  const button = (result: string, label: string) =>
    `<form method="post" style="display: inline"><input type="hidden" name="client_secret" value="${clientSecret}">` +
    `<button name="result" value="${result}" style="font-size: 1.2em; margin-right: 1em">${label}</button></form>`;
  return html(
    200,
    `<h1>Simulated 3-D Secure</h1><p>The simulated provider of this development server asks you to authenticate a payment of ` +
      `¥${amountYen.toLocaleString('en')}, as a card issuer would in the customer's browser (Stripe.js's handleNextAction).</p>` +
      `${button('succeed', 'Complete authentication')}${button('fail', 'Fail authentication')}`,
  );
}

function isSimulated(provider: AppServices['payments']): provider is SimulatedProvider {
  return provider !== null && 'finish' in provider;
}

/**
 * GET /dev/authenticate?client_secret=…: the simulated provider's 3-D Secure page; its buttons POST
 * the outcome back here, and then confirmCheckout (GraphiQL's ConfirmCheckout) settles the order.
 * Served only by a development server whose payments are simulated (no STRIPE_SECRET_KEY).
 */
export function simulatedAuthenticationRoutes(services: AppServices): Route[] {
  const provider = services.payments;
  if (!services.config.process.development || !isSimulated(provider)) return [];
  return [
    {
      matches: (method, pathname) => pathname === SIMULATED_AUTHENTICATION_PATH && (method === 'GET' || method === 'POST'),
      async serve(request) {
        const fields = request.method === 'POST' ? new URLSearchParams(await request.text()) : new URL(request.url).searchParams;
        const clientSecret = fields.get('client_secret') ?? '';
        const waiting = CLIENT_SECRET.test(clientSecret) ? provider.waiting(clientSecret) : null;
        if (waiting === null) return html(404, noPaymentWaits(clientSecret));
        if (request.method === 'GET') return challengePage(clientSecret, waiting.amountYen);
        const succeed = fields.get('result') === 'succeed';
        provider.finish(clientSecret, succeed);
        return html(
          200,
          `<h1>Authentication ${succeed ? 'completed' : 'failed'}</h1><p>Back in GraphiQL, run ConfirmCheckout with the order's id: ` +
            `${succeed ? 'PAID' : 'DECLINED'}.</p>`,
        );
      },
    },
  ];
}
