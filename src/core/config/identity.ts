import { z } from 'zod';
import { custom, group, secret } from './kinds.js';
import { parseJwtSecret } from '../jwt-secret.js';

/** How callers prove who they are; neither set: dev mode (`isDevMode`, src/core/config.ts). */
export const identityVariables = group('Who may call', {
  actionSecret: secret({ name: 'ACTION_SECRET', minLength: 16 }).describe(
    'shared secret Hasura sends as `x-action-secret`; outside development, this or `JWT_SECRET` is required',
  ),
  jwt: custom({
    name: 'JWT_SECRET',
    accepts: "JSON, Hasura's form",
    schema: z.string().transform((raw) => parseJwtSecret(raw)),
  }).describe(
    "Hasura's `HASURA_GRAPHQL_JWT_SECRET` JSON: a `type` and `key` (shared secret, PEM, certificate or JWK) or a `jwk_url`, " +
      'with `audience`, `issuer`, claims fields, `allowed_skew`, `header` (see [JWT_SECRET](#jwt_secret))',
  ),
});
