import { createServer, connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createTestDatabaseUrl } from './support/harness.js';
import { listenOnLoopback, NOTHING_LISTENS } from './support/ports.js';
import { captureOutput, runScript, spawnScript, stopScript } from './support/scripts.js';

const PASSWORD = 'never-print-this-9f3c';

/**
 * A port in front of the test database that resets every connection until the test says it is
 * up, then forwards: a database that "comes up" when the test says so.
 */
async function databaseComingUp(to: number): Promise<{ port: number; up(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let up = false;
  const server = createServer((client) => {
    if (!up) {
      client.resetAndDestroy();
      return;
    }
    const upstream = connect(to, '127.0.0.1');
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('error', () => socket.destroy());
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
  });
  const listening = await listenOnLoopback(server);
  return {
    port: listening.port,
    up: () => (up = true),
    close: () => {
      sockets.forEach((socket) => socket.destroy());
      return listening.close();
    },
  };
}

const attemptLines = (output: string) => output.split('\n').filter((line) => line.includes('database not reachable yet'));

describe('start-up against a database that is not there', () => {
  it('retries for DB_CONNECT_TIMEOUT_MS, logging host, port and database per attempt, then names DATABASE_URL', async () => {
    const port = NOTHING_LISTENS;
    const { code, output } = await runScript('src/entry/main.ts', {
      DATABASE_URL: `postgres://app:${PASSWORD}@127.0.0.1:${port}/shop`,
      DB_CONNECT_TIMEOUT_MS: '1500',
      PORT: '0',
    });
    expect(code).toBe(1);
    const attempts = attemptLines(output);
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    for (const line of attempts)
      expect(JSON.parse(line)).toMatchObject({
        host: '127.0.0.1',
        port,
        database: 'shop',
        reason: expect.stringContaining('ECONNREFUSED'),
      });
    expect(output).toMatch(
      /Could not connect to the database that DATABASE_URL names \(127\.0\.0\.1:\d+\/shop\) within DB_CONNECT_TIMEOUT_MS=1500/,
    );
    expect(output).not.toContain(PASSWORD);
  });

  it('a database that refuses the password: the same retries, then a message naming DATABASE_URL', async () => {
    const url = new URL(await createTestDatabaseUrl());
    url.password = PASSWORD;
    const { code, output } = await runScript('src/entry/main.ts', {
      DATABASE_URL: url.toString(),
      DB_CONNECT_TIMEOUT_MS: '1000',
      PORT: '0',
    });
    expect(code).toBe(1);
    expect(attemptLines(output).length).toBeGreaterThanOrEqual(1);
    expect(output).toMatch(/DATABASE_URL names .*: password authentication failed/);
    expect(output).not.toContain(PASSWORD);
  });

  it('starts once the database comes up within the time', async () => {
    const database = new URL(await createTestDatabaseUrl());
    const comingUp = await databaseComingUp(Number(database.port));
    database.port = String(comingUp.port);
    const child = spawnScript('src/entry/main.ts', {
      DATABASE_URL: database.toString(),
      DB_CONNECT_TIMEOUT_MS: '60000',
      PORT: '0',
      RUN_WORKERS: 'false',
    });
    const output = captureOutput(child);
    try {
      for (const deadline = Date.now() + 30_000; attemptLines(output()).length < 2 && Date.now() < deadline;) await sleep(50);
      expect(attemptLines(output()).length).toBeGreaterThanOrEqual(2);
      comingUp.up();
      // Log lines reach stdout in batches (at least every second); the banner at once.
      const started = () => /GraphQL.*: http:\/\/localhost:\d+\/graphql/.test(output()) && output().includes('database reachable');
      for (const deadline = Date.now() + 30_000; !started() && Date.now() < deadline;) {
        if (child.exitCode !== null) break;
        await sleep(50);
      }
      expect(output()).toContain('database reachable');
      const base = /(http:\/\/localhost:\d+)\/graphql/.exec(output())![1]!;
      expect((await fetch(`${base}/ready`)).status).toBe(200);
    } finally {
      await stopScript(child);
      await comingUp.close();
    }
  });
});
