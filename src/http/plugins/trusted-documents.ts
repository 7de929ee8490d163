import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { GraphQLSchema } from 'graphql';
import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import type { Plugin } from 'graphql-yoga';
import { ConfigError, type AppConfig } from '../../core/config.js';
import type { Context } from '../../graphql/context.js';
import { ErrorCode } from '../../core/errors.js';
import { actionDocuments } from '../action-documents.js';
import { sessionOfRequest } from '../../features/identity/session.js';

/** hash -> document, as graphql-codegen's client preset writes persisted-documents.json (hashes kept bare). */
type TrustedManifest = Map<string, string>;

/**
 * A document's hash without the algorithm prefix. The client preset from version 5 writes and
 * sends `sha256:<hash>`, earlier ones the bare hash; both name the same document.
 */
const bareHash = (hash: string) => (hash.startsWith('sha256:') ? hash.slice('sha256:'.length) : hash);

function readTrustedManifest(path: string): TrustedManifest {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError('TRUSTED_DOCUMENTS', `cannot read ${path} as JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError('TRUSTED_DOCUMENTS', `${path} must be a JSON object of hash -> document`);
  }
  const manifest: TrustedManifest = new Map();
  for (const [hash, document] of Object.entries(parsed)) {
    if (typeof document !== 'string') throw new ConfigError('TRUSTED_DOCUMENTS', `${path}: the entry ${hash} is not a document`);
    manifest.set(bareHash(hash), document);
  }
  return manifest;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

const refusal = (message: string, code: string, status: number) => ({
  message,
  extensions: { code, http: { status } },
});

/**
 * TRUSTED_DOCUMENTS: only the frontend's own operations run, for every role but the platform
 * operator. A client sends a document's hash the way graphql-codegen's client preset does
 * (`extensions.persistedQuery.sha256Hash`), or the document itself when it is byte for byte one of
 * the manifest's. The /actions documents are built by this server and are always trusted.
 */
export function useTrustedDocuments(config: AppConfig, schema: GraphQLSchema): Plugin<Context> {
  const manifest = readTrustedManifest(config.edge.trustedDocumentsPath!);
  for (const document of actionDocuments(schema).values()) manifest.set(sha256(document), document);
  const hashOfDocument = new Map([...manifest].map(([hash, document]) => [document, hash]));
  return {
    onPluginInit({ addPlugin }) {
      addPlugin({
        // A trusted document sent in full becomes a request by its hash.
        onParams({ params, setParams }) {
          const hash = params.query === undefined ? undefined : hashOfDocument.get(params.query);
          if (hash === undefined) return;
          setParams({
            ...params,
            query: undefined,
            extensions: { ...params.extensions, persistedQuery: { version: 1, sha256Hash: hash } },
          });
        },
      });
      addPlugin(
        usePersistedOperations({
          getPersistedOperation: (hash) => manifest.get(bareHash(hash)) ?? null,
          allowArbitraryOperations: async (request) => {
            const session = await sessionOfRequest(request, config).catch(() => null);
            return session?.role === 'operator';
          },
          customErrors: {
            persistedQueryOnly: refusal(
              "Only trusted documents run here: send the hash of one of the frontend's documents in extensions.persistedQuery.sha256Hash",
              ErrorCode.forbidden,
              403,
            ),
            notFound: refusal('No trusted document has this hash', ErrorCode.notFound, 404),
            keyNotFound: refusal('Send a document hash in extensions.persistedQuery.sha256Hash', ErrorCode.badUserInput, 400),
          },
        }),
      );
    },
  };
}
