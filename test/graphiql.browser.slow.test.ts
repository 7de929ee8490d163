import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { mkdir } from 'node:fs/promises';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedIfEmpty } from '../src/db/seed.js';
import { DEMO_CONTRACT_ID, DEMO_HEADERS } from '../src/http/graphiql.js';
import { serveTestBackend, type ServedBackend } from './support/harness.js';

/** Debian's chromium, which .ci/run installs; CHROMIUM_PATH points elsewhere. */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const ARTIFACTS = new URL('./artifacts/', import.meta.url);

const browserMissing = existsSync(CHROMIUM) ? null : `no browser at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
if (browserMissing) console.warn(`GraphiQL browser test skipped: ${browserMissing}`);

describe.skipIf(browserMissing !== null)('GraphiQL in a real browser', () => {
  let backend: ServedBackend;
  let browser: Browser;
  /** Every GET the server answered, with the bytes it wrote to the socket for it (headers and encoded body). */
  const served: { path: string; bytes: number }[] = [];
  let inFlight = 0;

  beforeAll(async () => {
    backend = await serveTestBackend();
    await seedIfEmpty(backend.database.db);
    // Counted at the server: Chromium reports no sizes for what a worker fetches.
    backend.server.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      if (req.method !== 'GET') return;
      const before = req.socket.bytesWritten;
      inFlight++;
      res.once('close', () => {
        inFlight--;
        served.push({ path: (req.url ?? '').split('?')[0]!, bytes: req.socket.bytesWritten - before });
      });
    });
    // As root in a closed network: no sandbox, and none of Chromium's calls home.
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await backend?.close();
  });

  /** The number acme's next document gets: the tests share the demo tenant, in any order. */
  const nextDocNumber = async () => {
    const { rows } = await backend.sql.query<{ n: number }>(
      "select coalesce(max(doc_number), 9999999)::int + 1 as n from contract_documents where tenant_id = 'acme'",
    );
    return rows[0]!.n;
  };

  it('runs a createContractDocument mutation typed with its headers and shows the document number', async ({ annotate }) => {
    const started = performance.now();
    const expected = await nextDocNumber();
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(backend.url, { waitUntil: 'load' });
    await page.locator('.graphiql-execute-button').waitFor({ timeout: 60_000 });

    // The operation editor: replace the sample with our mutation. insertText types like a paste,
    // so the editor's bracket completion does not double the braces.
    const editor = page.locator('.graphiql-query-editor .monaco-editor').first();
    await editor.click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText(
      `mutation { createContractDocument(input: { contractId: "${DEMO_CONTRACT_ID}" }) { document { id contractId docNumber createdAt } } }`,
    );

    await page
      .getByRole('button', { name: /prettify/i })
      .first()
      .click();
    await editor.click();
    await page.keyboard.press('ControlOrMeta+Home');

    // The headers editor: the demo member of tenant acme.
    await page
      .getByRole('button', { name: /headers/i })
      .first()
      .click();
    const headers = page.locator('.graphiql-editor-tool .monaco-editor').last();
    await headers.click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText(JSON.stringify(DEMO_HEADERS));
    await page.keyboard.press('ControlOrMeta+Home');

    await page.locator('.graphiql-execute-button').click();
    const result = page.locator('.graphiql-response');
    // The response editor renders spaces as no-break spaces: \s matches both.
    await expect.poll(async () => result.innerText(), { timeout: 30_000 }).toMatch(new RegExp(`"docNumber":\\s+${expected}\\b`));
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL('graphiql.png', ARTIFACTS).pathname });
    await annotate(`GraphiQL browser test: ${(performance.now() - started).toFixed(0)} ms from page load to the answer and screenshot`);

    const stored = await backend.sql.query("select doc_number from contract_documents where tenant_id = 'acme' and doc_number = $1", [
      expected,
    ]);
    expect(stored.rowCount).toBe(1);
    await page.close();
  });

  it('runs the walkthrough as it opens: step 2, CreateDocument, with the Variables pane already filled in', async () => {
    const expected = await nextDocNumber();
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(backend.url, { waitUntil: 'load' });
    await page.locator('.graphiql-execute-button').waitFor({ timeout: 60_000 });
    const variables = page.locator('.graphiql-editor-tool .monaco-editor').first();
    await expect.poll(async () => variables.innerText(), { timeout: 30_000 }).toContain(DEMO_CONTRACT_ID);

    // Ctrl+Enter runs the operation under the cursor: put it inside CreateDocument.
    const editor = page.locator('.graphiql-query-editor .monaco-editor').first();
    await editor.getByText('createContractDocument').first().click();
    await page.keyboard.press('ControlOrMeta+Enter');
    const result = page.locator('.graphiql-response');
    await expect.poll(async () => result.innerText(), { timeout: 30_000 }).toMatch(new RegExp(`"docNumber":\\s+${expected}\\b`));
    expect(await result.innerText()).not.toContain('was not provided');
    await page.close();
  });

  it('loads the page and its files in under 2 MB, and a reload transfers almost nothing, after an edit put the query in the URL too', async ({
    annotate,
  }) => {
    const page = await browser.newPage();
    /** Paths whose bodies came over the wire in an earlier load. */
    const fetchedBefore = new Set<string>();
    /**
     * What the server sent for the GETs of one page load, per path. A load ends once GraphiQL's
     * three editor workers run (created after the page renders, from the cache or not) and the
     * server has nothing in flight. `again`: the bytes of paths an earlier load fetched already (a
     * file the browser fetches lazily, such as the icon, may arrive first in any load).
     */
    const transferred = async (load: () => Promise<unknown>) => {
      const first = served.length;
      const workers = new Set<string>();
      const onWorker = (worker: { url(): string }) => workers.add(worker.url());
      page.on('worker', onWorker);
      await load();
      await page.locator('.graphiql-execute-button').waitFor({ timeout: 60_000 });
      await expect.poll(() => workers.size, { timeout: 60_000 }).toBeGreaterThanOrEqual(3);
      await expect.poll(() => inFlight, { timeout: 60_000 }).toBe(0);
      page.off('worker', onWorker);
      const each = served.slice(first);
      const again = each.filter(({ path }) => fetchedBefore.has(path));
      /** Files whose body came again (more than headers): what a cache should have spared. */
      const refetched = again.filter(({ bytes }) => bytes > 1_000).map(({ path }) => path);
      for (const { path, bytes } of each) if (bytes > 1_000) fetchedBefore.add(path);
      const sum = (list: typeof each) => list.reduce((total, { bytes }) => total + bytes, 0);
      return { requests: each.length, bytes: sum(each), againBytes: sum(again), refetched, each };
    };
    const describe = (label: string, load: Awaited<ReturnType<typeof transferred>>) =>
      `${label} ${load.bytes} bytes in ${load.requests} GETs (${load.each.map(({ path, bytes }) => `${path.split('/').pop()} ${bytes}`).join(', ')})`;
    // GraphiQL POSTs its introspection query to /graphql as soon as it opens: the cached page must survive that.
    const introspected = page.waitForResponse((response) => response.url() === backend.url && response.request().method() === 'POST');
    const first = await transferred(() => page.goto(backend.url, { waitUntil: 'load' }));
    expect((await introspected).status()).toBe(200);
    const reload = await transferred(() => page.reload({ waitUntil: 'load' }));
    await annotate(`GraphiQL transferred: ${describe('first load', first)}; ${describe('reload', reload)}`);
    expect(first.bytes).toBeGreaterThan(100_000);
    expect(first.bytes).toBeLessThan(2_000_000);
    expect(reload.requests).toBeGreaterThan(0);
    expect(reload.refetched).toEqual([]);
    expect(reload.againBytes).toBeLessThan(10_000);

    // An edited query goes into the page's URL (/graphiql?query=…): a URL the cache has never
    // seen, so the page itself comes again, but none of its code.
    const editor = page.locator('.graphiql-query-editor .monaco-editor').first();
    await editor.click();
    await page.keyboard.press('ControlOrMeta+End');
    await page.keyboard.insertText('\n# edited before a reload');
    await expect.poll(() => new URL(page.url()).searchParams.get('query') ?? '', { timeout: 30_000 }).toContain('edited before a reload');
    const edited = await transferred(() => page.reload({ waitUntil: 'load' }));
    await annotate(
      `GraphiQL transferred: ${describe(`reload after an edit (query string of ${new URL(page.url()).search.length} characters)`, edited)}`,
    );
    expect(edited.requests).toBeGreaterThan(0);
    expect(edited.refetched.filter((path) => path !== '/graphiql')).toEqual([]);
    expect(edited.againBytes).toBeLessThan(10_000);
    await expect.poll(async () => editor.innerText(), { timeout: 30_000 }).toMatch(/edited\s+before\s+a\s+reload/);
    await page.close();
  });
});
