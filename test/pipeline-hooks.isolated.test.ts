import type { Plugin, YogaServerOptions } from 'graphql-yoga';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { asOperator, asUser, callAction, createTenant, serveTestBackend, type Headers, type ServedBackend } from './support/harness.js';

/**
 * Every plugin the server installs (each of createYoga's plugins, and each one those add in
 * onPluginInit) has its hooks recorded as they run. Yoga's own handler, called directly, is the
 * yardstick: whatever path the HTTP layer gives a request (the socket, the Fetch path, a known
 * document or a new one) must run every hook Yoga's pipeline runs for it. Hasura's actions run the
 * operation's part of the pipeline (onParams onwards); the HTTP hooks they do not run are named
 * below with the reason each does not apply, so a plugin that adds a request hook fails here. A
 * known document on the socket takes the known-document path, which runs no hook and applies each
 * one the pipeline runs for it itself (KNOWN_DOCUMENT_PATH_APPLIES).
 */

/** Hooks recorded since the last `take()`, as `<plugin>.<hook>` (an after-hook as `<hook>:done`). */
const recorder = vi.hoisted(() => {
  let seen = new Set<string>();
  return {
    note: (name: string) => void seen.add(name),
    take(): Set<string> {
      const taken = seen;
      seen = new Set();
      return taken;
    },
  };
});

/** Hooks that run once when the server is built, not per request. */
const SETUP_HOOKS = new Set(['onPluginInit', 'onYogaInit', 'onSchemaChange', 'onEnveloped', 'onDispose']);

vi.mock('graphql-yoga', async (importOriginal) => {
  const yoga = await importOriginal<typeof import('graphql-yoga')>();
  type AnyPlugin = Record<string, unknown>;

  const afterHooks = (name: string, returned: unknown): unknown => {
    if (typeof returned === 'function') {
      return (...args: unknown[]) => (recorder.note(`${name}:done`), (returned as (...a: unknown[]) => unknown)(...args));
    }
    if (returned !== null && typeof returned === 'object' && !('then' in returned)) {
      for (const [key, value] of Object.entries(returned)) {
        if (key.startsWith('on') && typeof value === 'function') {
          (returned as AnyPlugin)[key] = (...args: unknown[]) => (recorder.note(`${name}.${key}`), value(...args));
        }
      }
    }
    return returned;
  };

  const recorded = (plugin: AnyPlugin, label: string): AnyPlugin => {
    const wrapped: AnyPlugin = { ...plugin };
    for (const [hook, value] of Object.entries(plugin)) {
      if (!hook.startsWith('on') || typeof value !== 'function') continue;
      const name = `${label}.${hook}`;
      if (hook === 'onPluginInit') {
        wrapped[hook] = (payload: { addPlugin: (added: AnyPlugin) => void }) => {
          let added = 0;
          const addPlugin = (child: AnyPlugin) => payload.addPlugin(recorded(child, `${label}+${added++}`));
          return value({ ...payload, addPlugin });
        };
      } else if (SETUP_HOOKS.has(hook)) {
        continue;
      } else {
        wrapped[hook] = (...args: unknown[]) => {
          recorder.note(name);
          const returned = value(...args);
          return returned instanceof Promise ? returned.then((r) => afterHooks(name, r)) : afterHooks(name, returned);
        };
      }
    }
    return wrapped;
  };

  return {
    ...yoga,
    createYoga: (options: YogaServerOptions<Record<string, unknown>, Record<string, unknown>>) =>
      yoga.createYoga({
        ...options,
        plugins: (options.plugins ?? []).map((plugin, index) =>
          plugin && typeof plugin === 'object' ? recorded(plugin as AnyPlugin, `plugin ${index}`) : plugin,
        ) as Plugin[],
      }),
  };
});

/** HTTP hooks an action does not run, and why nothing of theirs applies to an action's answer (Hasura's shape, not a GraphQL response). */
const NOT_FOR_ACTIONS: Record<string, string> = {
  onRequest: 'CORS and GraphiQL concern browsers; Hasura calls without an Origin',
  onRequestParse: "an action's body is Hasura's, read by src/http/actions.ts",
  onResultProcess: "the action's answer is made by src/http/actions.ts from the result under the error contract",
  onResponse: 'Vary on Origin (no Origin) and the replay mark, which src/http/actions.ts applies with the same function',
};

/**
 * The hooks Yoga's pipeline runs for a known document (parsed, validated and compiled already), by
 * plugin of createGraphQLServer's list (development's: no introspection refusal), and where the
 * known-document path (src/http/known-document-path.ts) applies each. A plugin with a request hook
 * added to the list fails the known-document test below until the path applies it (or turns itself
 * off when the plugin is installed, as for trusted documents). Operation spans (tracing on, not in this
 * list) are applied by the path with the same function, inOperationSpan: test/tracing.slow.test.ts.
 */
const KNOWN_DOCUMENT_PATH_APPLIES: Record<string, string> = {
  'plugin 0.onResponse': 'Vary on Origin: the path takes no request with an Origin; the replay mark by the same function (markReplayed)',
  'plugin 1.onExecute':
    'the compiled execution: the path runs the same one (CompiledExecutions.of) and takes only documents compiled already',
  'plugin 2+0.onParse': 'MAX_QUERY_TOKENS on the parser: the document comes from the parser cache, which holds only what that parser read',
  'plugin 2+1.onValidate': 'MAX_ALIASES, a validation rule: the path takes only documents whose cached validation found nothing',
  'plugin 2+2.onValidate': 'MAX_QUERY_DEPTH, likewise',
  'plugin 2.onValidate': 'MAX_SELECTIONS, counted on the same document, which passed it when it was validated',
  'plugin 3.onExecute': 'the operation checks: the same list, in order, a refusal ending the execution',
  'plugin 3.onExecute.onExecuteDone': 'their watches of the result, refusals included, before the masking',
  'plugin 4.onParams': 'the admission gate: the same gate, around everything after it',
  'plugin 5.onExecutionResult': 'the error contract: the same one, on the result',
  'plugin 5.onResultProcess': 'the error contract on a result that never passed it: every result of the path did',
  'plugin 6.onValidate': 'the validation cache: the same cached result, its known-valid count kept',
};

const TENANT = 'pipeline-hooks';
const MUTATION = 'mutation ($input: CreateContractInput!) { createContract(input: $input) { contract { title } } }';

describe("every path runs every plugin's hooks", () => {
  let backend: ServedBackend;
  beforeAll(async () => {
    backend = await serveTestBackend();
    await createTenant(backend, TENANT);
  });
  afterAll(() => backend.close());

  const init = (body: unknown, headers: Headers): RequestInit => ({
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify(body),
  });

  /** The hooks one request ran. */
  async function hooksOf(send: () => Promise<Response>): Promise<Set<string>> {
    recorder.take();
    const response = await send();
    await response.text();
    return recorder.take();
  }

  const yogaItself = (body: unknown, headers: Headers) => () =>
    Promise.resolve(backend.app.yoga.fetch(new Request('http://test.local/graphql', init(body, headers)), { report: {} }));
  const paths: [string, (body: unknown, headers: Headers) => () => Promise<Response>][] = [
    ['on the socket', (body, headers) => () => fetch(backend.url, init(body, headers))],
    ['on the Fetch path', (body, headers) => () => backend.app.fetch(new Request(backend.url, init(body, headers)))],
    [
      'on the socket, with an Origin',
      (body, headers) => () => fetch(backend.url, init(body, { ...headers, origin: 'http://localhost:3000' })),
    ],
  ];
  let keys = 0;
  /** Each request of its own document text (a comment tells them apart), so that each path meets it new, then known; each keyed one a key of its own. */
  const requests: [string, (text: string) => { body: unknown; headers: () => Headers }][] = [
    ['a query', (text) => ({ body: { query: `{ viewer { role } } # ${text}` }, headers: asOperator })],
    [
      'a mutation',
      (text) => ({ body: { query: `${MUTATION} # ${text}`, variables: { input: { title: 'Hooks' } } }, headers: () => asUser(TENANT) }),
    ],
    [
      'a keyed mutation',
      (text) => ({
        body: { query: `${MUTATION} # ${text}`, variables: { input: { title: 'Keyed' } } },
        headers: () => ({ ...asUser(TENANT), 'idempotency-key': `hooks-${keys++}` }),
      }),
    ],
    ['a document that does not validate', (text) => ({ body: { query: `{ viewer { nope } } # ${text}` }, headers: asOperator })],
  ];

  for (const [path, send] of paths) {
    for (const [name, request] of requests) {
      it(`${path}: ${name}, new and known, runs every hook Yoga's own pipeline runs`, async () => {
        const yardstick = request(`yardstick ${path}: ${name}`);
        const sent = request(`${path}: ${name}`);
        // The first finds the document new, the second parsed and validated.
        for (let i = 0; i < 2; i++) {
          const expected = await hooksOf(yogaItself(yardstick.body, yardstick.headers()));
          expect(expected.size).toBeGreaterThan(5);
          const ran = await hooksOf(send(sent.body, sent.headers()));
          expect([...expected].filter((hook) => !ran.has(hook))).toEqual([]);
        }
      });
    }
  }

  it('on the socket, a known document takes the known-document path, which applies each hook the pipeline runs for it as named', async () => {
    const answered = async () => (await backend.services.metrics.knownDocumentPath.get()).values[0]?.value ?? 0;
    const onSocket = paths[0]![1];
    for (const [name, request] of requests.filter(([name]) => name !== 'a document that does not validate')) {
      const yardstick = request(`yardstick known: ${name}`);
      const sent = request(`known: ${name}`);
      // New, then parsed and validated (executed by the standard executor), then compiled: from the third on, known to the path.
      for (let i = 0; i < 3; i++) {
        const expected = await hooksOf(yogaItself(yardstick.body, yardstick.headers()));
        const before = await answered();
        const ran = await hooksOf(onSocket(sent.body, sent.headers()));
        if (i < 2) {
          expect([...expected].filter((hook) => !ran.has(hook))).toEqual([]);
          expect(await answered()).toBe(before);
          continue;
        }
        expect([...expected].sort(), name).toEqual(Object.keys(KNOWN_DOCUMENT_PATH_APPLIES).sort());
        expect([...ran]).toEqual([]);
        expect(await answered()).toBe(before + 1);
      }
    }
  });

  it("an action runs every hook of the operation that Yoga's pipeline runs, and skips only the HTTP hooks named, until the known-document path takes it", async () => {
    const session = asUser(TENANT);
    const onSocket = async (request: Request) =>
      fetch(`${backend.origin}/actions`, { method: 'POST', headers: request.headers, body: await request.text() });
    // The action's document is new to the first call only, and so is the yardstick's.
    const yardstick = { query: `${MUTATION} # yardstick`, variables: { input: { title: 'Action' } } };
    const answered = async () => (await backend.services.metrics.knownDocumentPath.get()).values[0]?.value ?? 0;
    // From its third call on (the second compiled it), the action's document is known: the known-document path answers it.
    let calls = 0;
    for (const target of [onSocket, backend.app.fetch]) {
      for (let i = 0; i < 3; i++) {
        const expected = await hooksOf(yogaItself(yardstick, session));
        const before = await answered();
        const ran = await hooksOf(() => callAction(target, 'createContract', { title: 'Action' }, session));
        const skipped = [...expected].filter((hook) => !ran.has(hook));
        const byPath = (await answered()) - before;
        if (++calls <= 2) {
          expect(skipped.filter((hook) => !(hook.split('.')[1]!.split(':')[0]! in NOT_FOR_ACTIONS))).toEqual([]);
          expect(byPath).toBe(0);
        } else {
          expect([...ran]).toEqual([]);
          expect(skipped.filter((hook) => !(hook in KNOWN_DOCUMENT_PATH_APPLIES))).toEqual([]);
          expect(byPath).toBe(1);
        }
      }
    }
  });
});
