import { createYoga, type Plugin } from 'graphql-yoga';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { schema } from '../src/graphql/schema.js';
import type { Context } from '../src/graphql/context.js';
import { knownDocuments } from '../src/http/document-cache.js';
import { useAdmission } from '../src/http/plugins/admission-gate.js';
import { useValidationCache } from '../src/http/plugins/validation-cache.js';
import { createOperationRunner } from '../src/http/run-operation.js';
import { operationAdmission, operationContext, type ServerContext } from '../src/http/yoga.js';
import { asOperator, createTestBackend, type TestBackend } from './support/harness.js';

/**
 * A document's repeats run straight through Yoga's executor (src/http/run-operation.ts): a plugin
 * must find the same context there as on Yoga's own path, the server context with the request
 * and its parameters included, or a plugin that reads them would change only for repeats.
 */
describe('an operation run in process', () => {
  let backend: TestBackend;
  beforeAll(async () => {
    backend = await createTestBackend();
  });
  afterAll(() => backend.close());

  it("gives a repeat's execution hooks the context Yoga's pipeline gives the first run", async () => {
    const { services } = backend;
    const known = knownDocuments(1024 * 1024);
    const gate = operationAdmission(services);
    const seen: { keys: string[]; method: unknown; query: unknown }[] = [];
    const probe: Plugin<Context> = {
      onExecute({ args }) {
        const context = args.contextValue as unknown as Record<string, unknown> & { request?: Request; params?: { query?: string } };
        seen.push({ keys: Object.keys(context).sort(), method: context.request?.method, query: context.params?.query });
      },
    };
    const yoga = createYoga<ServerContext, Context>({
      schema,
      logging: false,
      parserAndValidationCache: { ...known.caches!, validationCache: false },
      plugins: [useAdmission(gate), useValidationCache(known.validations), probe],
      context: operationContext(services),
    });
    const run = createOperationRunner({ yoga, services, known, gate });
    const params = { query: '{ viewer { role } }' };
    const request = () => new Request('http://test.local/graphql', { method: 'POST', headers: asOperator() });
    const before = (await services.metrics.knownDocumentOperations.get()).values[0]?.value ?? 0;
    for (let i = 0; i < 2; i++) expect(await run(request(), params, { report: {} })).toEqual({ data: { viewer: { role: 'operator' } } });
    // The second ran from the known document.
    expect(((await services.metrics.knownDocumentOperations.get()).values[0]?.value ?? 0) - before).toBe(1);
    expect(seen).toHaveLength(2);
    expect(seen[1]).toEqual(seen[0]);
    expect(seen[0]).toMatchObject({ method: 'POST', query: params.query });
  });
});
