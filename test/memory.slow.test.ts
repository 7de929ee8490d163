import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CACHED_SOURCE_MAX_CHARS, documentCaches, estimatedDocumentBytes } from '../src/http/document-cache.js';
import { LoadClient } from './load/client.js';
import { asUser, createTestDatabaseUrl } from './support/harness.js';
import { bannerPort, captureOutput, spawnScript, stopScript } from './support/scripts.js';

const DOCUMENTS = 3_000;
/** Of them, this many do not parse (they end in an unclosed selection): the parse-error cache's share. */
const UNPARSABLE = 1_000;
const COMMENT_CHARS = 95_000;
/** Few at a time: the documents, not the concurrency, are what this measures. */
const CLIENTS = 2;
const MAX_GROWTH_BYTES = 64 * 1024 * 1024;
const SERVER_ENTRY = path.resolve('src/entry/main.ts');
const HEAP_PROBE = path.resolve('test/support/heap-probe.cjs');

/**
 * What the server still holds after a full garbage collection (V8's heap and the memory of its
 * buffers), from test/support/heap-probe.cjs loaded into it. Resident memory would also count pages
 * the allocator keeps after the garbage is gone: under load it kept 180 MB for over 90 s.
 */
async function heldBytes(probePort: number): Promise<number> {
  const { heapUsed, external } = (await (await fetch(`http://127.0.0.1:${probePort}/`)).json()) as { heapUsed: number; external: number };
  return heapUsed + external;
}

/** A distinct ~95 KB document: a comment no cache has seen makes every one new. */
const documentNumber = (i: number) => {
  const comment = `#${i} ${randomBytes(COMMENT_CHARS / 2).toString('hex')}`;
  return i % (DOCUMENTS / UNPARSABLE) === 0 ? `{ viewer { role } ${comment}` : `{ viewer { role } } ${comment}`;
};

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;

describe('memory is bounded by bytes', () => {
  it(`${DOCUMENTS.toLocaleString('en')} distinct 95 KB documents leave the server holding less than 64 MB more after a full collection`, async ({
    annotate,
  }) => {
    const child = spawnScript('src/entry/main.ts', {
      DATABASE_URL: await createTestDatabaseUrl(),
      PORT: '0',
      RUN_WORKERS: 'false',
      LOG_LEVEL: 'warn',
      NODE_OPTIONS: `--expose-gc --require ${HEAP_PROBE}`,
      HEAP_PROBE_ENTRY: SERVER_ENTRY,
    });
    const output = captureOutput(child);
    try {
      // Its start sets the pace (a busy machine makes it minutes): the banner, or its end, bounded by the test's timeout.
      while (child.exitCode === null && (bannerPort(output()) === undefined || !/heap probe: /.test(output()))) await sleep(50);
      const base = `http://127.0.0.1:${bannerPort(output())}`;
      const probePort = Number(/heap probe: http:\/\/127\.0\.0\.1:(\d+)/.exec(output())?.[1]);
      const ready = async () => (await fetch(`${base}/ready`).catch(() => null))?.status ?? null;
      while (child.exitCode === null && (await ready()) !== 200) await sleep(50);
      expect(await ready(), output()).toBe(200);
      const client = new LoadClient(`${base}/graphql`, CLIENTS);
      await client.open();
      try {
        const send = async (from: number, to: number, document = documentNumber) => {
          const outcomes = { ok: 0, refused: 0 };
          let next = from;
          await Promise.all(
            Array.from({ length: CLIENTS }, async () => {
              while (next < to) {
                const reply = await client.graphql(document(next++), {}, asUser('memory'));
                if (reply.status === 200 && reply.body.data) outcomes.ok++;
                else outcomes.refused++;
              }
            }),
          );
          return outcomes;
        };
        // Warm up with small documents first (JIT, pools, buffers), so that what follows measures
        // what large ones leave behind.
        await send(0, 300, (i) => `{ viewer { role } } #warm-up ${i}`);
        const before = await heldBytes(probePort);
        const outcomes = await send(0, DOCUMENTS);
        const after = await heldBytes(probePort);
        await annotate(
          `memory: ${DOCUMENTS} distinct documents of ${COMMENT_CHARS / 1000} KB (${outcomes.ok} parsed and answered, ${outcomes.refused} refused as unparsable): ` +
            `held after a full collection ${mb(before)} before, ${mb(after)} after: ${mb(after - before)} kept (limit ${mb(MAX_GROWTH_BYTES)})`,
        );
        expect(outcomes).toEqual({ ok: DOCUMENTS - UNPARSABLE, refused: UNPARSABLE });
        expect(after - before).toBeLessThan(MAX_GROWTH_BYTES);
      } finally {
        client.close();
      }
    } finally {
      await stopScript(child);
    }
  }, 180_000);

  it('keeps parsed documents by their weight in bytes, the least recently used going first, and no text over the size kept', async ({
    annotate,
  }) => {
    const budget = 1024 * 1024;
    const caches = documentCaches(budget)!;
    const source = (i: number) => `{ viewer { role } } # ${i} ${'x'.repeat(10_000)}`;
    const weights: number[] = [];
    for (let i = 0; i < 1_000; i++) {
      const document = parse(source(i));
      weights.push(estimatedDocumentBytes(document, source(i)));
      caches.documentCache.set(source(i), document);
    }
    const kept = weights.filter((_, i) => caches.documentCache.get(source(i)) !== undefined);
    const keptBytes = kept.reduce((sum, weight) => sum + weight, 0);
    await annotate(`document cache of ${mb(budget)}: ${kept.length} of 1000 documents of 10 KB kept, ${mb(keptBytes)} by their weight`);
    expect(kept.length).toBeGreaterThan(0);
    expect(keptBytes).toBeLessThanOrEqual(budget);
    expect(caches.documentCache.get(source(999))).toBeDefined();
    expect(caches.documentCache.get(source(0))).toBeUndefined();
    const long = `{ viewer { role } } # ${'x'.repeat(CACHED_SOURCE_MAX_CHARS)}`;
    caches.documentCache.set(long, parse(long));
    expect(caches.documentCache.get(long)).toBeUndefined();
  });
});
