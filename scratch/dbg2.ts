import { startScratchDatabase, startServerProcess } from '../test/load/target.js';
const db = await startScratchDatabase();
console.log('db up');
const server = await startServerProcess('src/main.ts', { DATABASE_URL: db.databaseUrl });
console.log('server up', server.url);
const r = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-hasura-role': 'admin' }, body: JSON.stringify({ query: '{ viewer { role } }' }), signal: AbortSignal.timeout(5000) }).then(r => r.text(), e => String(e));
console.log(r);
await server.stop(); await db.stop();
