import { createServer } from 'node:http';
import { createYoga } from 'graphql-yoga';
import { schema } from '../src/graphql/schema.js';
import { LoadClient, runReleasedTogether } from '../test/load/client.js';

const mode = process.env.MODE ?? 'yoga';
if (process.env.ALS) { const { AsyncLocalStorage } = await import('node:async_hooks'); const als = new AsyncLocalStorage(); als.enterWith({ a: 1 }); }
const yoga = createYoga({ schema, context: () => ({ session: { role: 'user', tenantId: null, userId: null } }) as never });
const server = createServer(mode === 'yoga' ? yoga : (req, res) => { res.writeHead(200, {'content-type':'application/json'}); res.end('{"data":{}}'); });
await new Promise<void>((r) => server.listen(4557, r));
const client = new LoadClient('http://127.0.0.1:4557/graphql', 32);
await client.open();
for (const q of ['{ __typename }', '{ viewer { role } }', '{ viewer { role } }']) {
  const n = 5000;
  const t = performance.now();
  await runReleasedTogether(Array.from({ length: n }, () => () => client.graphql(q, {}, { 'x-hasura-role': 'user' })), 32);
  console.log(mode, q, (n / (performance.now() - t) * 1000).toFixed(0), 'rps');
}
client.close();
server.close();
