import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { chromium, type Browser, type Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedIfEmpty } from '../src/db/seed.js';
import { DEMO_HEADERS } from '../src/http/graphiql.js';
import { createTestBackend, serveOverHttp, type TestBackend } from './support/harness.js';

/** Debian's chromium, which .ci/run installs; CHROMIUM_PATH points elsewhere. */
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const ARTIFACTS = new URL('./artifacts/', import.meta.url);
const DEMO_CONTRACT = '11111111-1111-4111-8111-111111111111';

const browserMissing = existsSync(CHROMIUM) ? null : `no browser at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
if (browserMissing) console.warn(`GraphiQL browser test skipped: ${browserMissing}`);

describe.skipIf(browserMissing !== null)('GraphiQL in a real browser', () => {
  let backend: TestBackend;
  let url: string;
  let close: () => Promise<void>;
  let browser: Browser;

  beforeAll(async () => {
    backend = await createTestBackend();
    await seedIfEmpty(backend.database.db);
    const served = await serveOverHttp(backend);
    url = served.url;
    close = () => served.server.close();
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
    await close?.();
    await backend?.close();
  });

  it('runs a createContractDocument mutation typed with its headers and shows the document number', async () => {
    const started = performance.now();
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await page.goto(url, { waitUntil: 'load' });
    await page.locator('.graphiql-execute-button').waitFor({ timeout: 60_000 });

    // The operation editor: replace the sample with our mutation. insertText types like a paste,
    // so the editor's bracket completion does not double the braces.
    const editor = page.locator('.graphiql-query-editor .monaco-editor').first();
    await editor.click();
    await page.keyboard.press('ControlOrMeta+A');
    await page.keyboard.press('Delete');
    await page.keyboard.insertText(
      `mutation { createContractDocument(input: { contractId: "${DEMO_CONTRACT}" }) { document { id contractId docNumber createdAt } } }`,
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
    await expect.poll(async () => result.innerText(), { timeout: 30_000 }).toMatch(/"docNumber":\s+10000000\b/);
    await mkdir(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: new URL('graphiql.png', ARTIFACTS).pathname });
    console.log(`GraphiQL browser test: ${(performance.now() - started).toFixed(0)} ms from page load to the answer and screenshot`);

    const stored = await backend.sql.query("select doc_number from contract_documents where tenant_id = 'acme'");
    expect(stored.rows).toEqual([{ doc_number: 10_000_000 }]);
  });

  it('loads the page and its assets in under 2 MB, and a reload after running a query transfers almost nothing', async () => {
    const page = await browser.newPage();
    /** Bytes on the wire (headers and encoded bodies) of the requests a page load makes, as Chromium counts them. */
    const transferred = async (load: () => Promise<unknown>) => {
      const sizes: Promise<number>[] = [];
      const count = (request: Request) => {
        if (request.method() === 'GET') sizes.push(request.sizes().then((s) => s.responseHeadersSize + s.responseBodySize));
      };
      page.on('requestfinished', count);
      await load();
      await page.locator('.graphiql-execute-button').waitFor({ timeout: 60_000 });
      page.off('requestfinished', count);
      return { requests: sizes.length, bytes: (await Promise.all(sizes)).reduce((sum, size) => sum + size, 0) };
    };
    // GraphiQL POSTs its introspection query to /graphql as soon as it opens: the cached page must survive that.
    const introspected = page.waitForResponse((response) => response.url() === url && response.request().method() === 'POST');
    const first = await transferred(() => page.goto(url, { waitUntil: 'load' }));
    expect((await introspected).status()).toBe(200);
    const reload = await transferred(() => page.reload({ waitUntil: 'load' }));
    console.log(
      `GraphiQL transferred: first load ${first.bytes} bytes in ${first.requests} GETs, reload ${reload.bytes} bytes in ${reload.requests} GETs`,
    );
    expect(first.bytes).toBeGreaterThan(100_000);
    expect(first.bytes).toBeLessThan(2_000_000);
    expect(reload.requests).toBeGreaterThan(0);
    expect(reload.bytes).toBeLessThan(10_000);
    await page.close();
  });
});
