import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/core/logger.js';
import { asUser, createTenant, createTestBackend, gql, type TestBackend } from './support/harness.js';

/** Metrics and log lines are labelled only with names the schema has, so nothing a client writes grows them. */
describe('bounded observability', () => {
  let backend: TestBackend;
  let lines: string[];
  beforeAll(async () => {
    lines = [];
    backend = await createTestBackend({ log: createLogger('info', { write: (line: string) => void lines.push(line) }) });
    await createTenant(backend, 'labels');
  });
  afterAll(() => backend.close());

  const scrape = async () => (await backend.app.fetch(new Request('http://test.local/metrics'))).text();
  // The runtime's own series (process_*, nodejs_*) gain a line when a new kind of GC first runs or a
  // heap space first fills, whatever the clients send; what a client could grow is everything else.
  const applicationSeries = (text: string) =>
    text
      .split('\n')
      .filter((line) => !/^(# (HELP|TYPE) )?(process|nodejs)_/.test(line))
      .join('\n');

  it('labels requests with schema root fields, never with what the client wrote', async ({ annotate }) => {
    await gql(backend.app.fetch, '{ viewer { role } }', {}, asUser('labels'));
    const baseline = applicationSeries(await scrape()).length;
    const aliasPatterns = async (from: number, to: number) => {
      for (let i = from; i <= to; i++) {
        const aliases = Array.from({ length: (i % 14) + 1 }, (_, j) => `a${i}_${j}: viewer { role }`).join(' ');
        const mixed = i % 3 === 0 ? `${aliases} tenant { id }` : aliases;
        await gql(backend.app.fetch, `query Op${i} { ${mixed} }`, {}, asUser('labels'));
      }
      await gql(backend.app.fetch, '{ this is not graphql', {}, asUser('labels'));
    };
    await aliasPatterns(1, 100);
    const after100 = applicationSeries(await scrape()).length;
    await aliasPatterns(101, 200);
    const text = applicationSeries(await scrape());
    await annotate(`/metrics: ${baseline} bytes after 1 request, ${after100} after 100 alias patterns, ${text.length} after 200`);
    // The few fixed labels (multiple, invalid, their outcomes) appear once; after that, nothing grows.
    expect(text.length - baseline).toBeLessThan(8_192);
    expect(Math.abs(text.length - after100)).toBeLessThan(256);
    const operations = new Set([...text.matchAll(/operation="([^"]*)"/g)].map((m) => m[1]));
    expect([...operations].sort()).toEqual(['invalid', 'multiple', 'viewer']);
    expect(text).not.toMatch(/="[^"]*,[^"]*"/);
    const logged = lines.filter((line) => line.includes('request completed')).map((line) => JSON.parse(line).operation);
    expect(new Set(logged)).toEqual(new Set(['viewer', 'multiple', 'invalid']));
  });

  it('takes an outcome only from a status enum: a field aliased as status is no label', async () => {
    for (let i = 0; i < 20; i++) {
      await gql(backend.app.fetch, '{ viewer { status: userId } }', {}, asUser('labels', `injected-${i}`));
    }
    const outcomes = new Set([...(await scrape()).matchAll(/outcome="([^"]*)"/g)].map((m) => m[1]));
    expect([...outcomes].filter((outcome) => outcome!.includes('injected'))).toEqual([]);
    const logged = lines.filter((line) => line.includes('request completed')).map((line) => JSON.parse(line).outcome ?? null);
    expect(logged.filter((outcome) => String(outcome).includes('injected'))).toEqual([]);
  });
});
