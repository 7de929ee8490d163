import { createServer } from 'node:http';
import { createYoga } from 'graphql-yoga';
import { schema } from '../src/graphql/schema.js';
const yoga = createYoga({ schema, context: () => ({ session: null }) as never });
const server = createServer((req, res) => {
  res.setHeader('x-request-id', 'abc');
  res.once('finish', () => console.log('finished', res.statusCode));
  const r = yoga.handleNodeRequestAndResponse(req, res, {});
  console.log('returned', typeof r, r && typeof (r as any).then);
  Promise.resolve(r).then((v) => console.log('resolved', v), (e) => console.log('err', e));
});
server.listen(4558, async () => {
  const res = await fetch('http://127.0.0.1:4558/graphql', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"{__typename}"}', signal: AbortSignal.timeout(3000) }).catch(e => e);
  console.log('client got', res.status ?? res.message, res.status ? await res.text() : '');
  server.close();
});
