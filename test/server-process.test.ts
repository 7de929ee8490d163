import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createServer } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { print } from 'graphql';
import { CreateContractDocumentDocument } from './generated/graphql.js';
import { DEMO_HEADERS } from '../src/http/graphiql.js';

const PROJECT = new URL('..', import.meta.url).pathname;
const DEMO_CONTRACT = '11111111-1111-4111-8111-111111111111';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

interface Started {
  child: ChildProcess;
  output: () => string;
  base: string;
  exited: Promise<number | null>;
}

/** Runs `npm start`'s entry point as a user would, and waits for the URL it prints. */
async function startServer(env: Record<string, string>): Promise<Started> {
  const child = spawn(path.join(PROJECT, 'node_modules/.bin/tsx'), ['src/main.ts'], {
    cwd: PROJECT,
    env: { ...process.env, NODE_ENV: 'development', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setInterval(() => {
      const match = /GraphQL and GraphiQL: (http:\/\/localhost:\d+)\/graphql/.exec(output);
      if (match) {
        clearInterval(timer);
        resolve(match[1]!);
      }
      if (child.exitCode !== null) {
        clearInterval(timer);
        reject(new Error(`server exited: ${output}`));
      }
    }, 50);
  });
  return { child, output: () => output, base, exited };
}

const createDocument = (base: string) =>
  fetch(`${base}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...DEMO_HEADERS },
    body: JSON.stringify({ query: print(CreateContractDocumentDocument), variables: { input: { contractId: DEMO_CONTRACT } } }),
  });

describe('npm start on a fresh machine (embedded PostgreSQL)', () => {
  let dataRoot: string;
  let server: Started;
  let pgPort: number;

  beforeAll(async () => {
    dataRoot = await mkdtemp(path.join(os.tmpdir(), 'mutation-backend-start-'));
    await chmod(dataRoot, 0o755);
    pgPort = await freePort();
    server = await startServer({
      PORT: String(await freePort()),
      EMBEDDED_PG_PORT: String(pgPort),
      EMBEDDED_PG_DATA_DIR: path.join(dataRoot, 'postgres'),
      LOCK_TIMEOUT_MS: '20000',
    });
  });
  afterAll(async () => {
    server.child.kill('SIGKILL');
    await rm(dataRoot, { recursive: true, force: true });
  });

  it('migrates, loads the demo data, prints the headers and serves GraphQL, /health and /ready', async () => {
    expect(server.output()).toContain(JSON.stringify(DEMO_HEADERS));
    expect((await fetch(`${server.base}/health`)).status).toBe(200);
    expect((await fetch(`${server.base}/ready`)).status).toBe(200);
    const graphiql = await fetch(`${server.base}/graphql`, { headers: { accept: 'text/html' } });
    expect(await graphiql.text()).toContain('GraphiQL');
    const response = await createDocument(server.base);
    const body = (await response.json()) as { data: { createContractDocument: { document: { docNumber: number } } } };
    expect(body.data.createContractDocument.document.docNumber).toBe(10_000_000);
  });

  it('on SIGTERM lets the request in flight finish, then stops itself and the database', async () => {
    // Hold the tenant's sequence row so the next request is in flight when the signal arrives.
    const admin = new pg.Client({ connectionString: await embeddedUrl(path.join(dataRoot, 'postgres'), pgPort) });
    await admin.connect();
    await admin.query('begin');
    await admin.query("select * from document_sequences where tenant_id = 'acme' for update");
    const inFlight = createDocument(server.base);
    await new Promise((resolve) => setTimeout(resolve, 500));
    server.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 500));
    await admin.query('commit');
    await admin.end();
    const response = await inFlight;
    const body = (await response.json()) as { data: { createContractDocument: { document: { docNumber: number } } } };
    expect(body.data.createContractDocument.document.docNumber).toBe(10_000_001);
    expect(await server.exited).toBe(0);
    expect(server.output()).toContain('stopped');
    await expect(fetch(`${server.base}/health`)).rejects.toThrow();
  });
});

async function embeddedUrl(dataDir: string, port: number): Promise<string> {
  const password = (await readFile(path.join(dataDir, 'app-password'), 'utf8')).trim();
  return `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
}
