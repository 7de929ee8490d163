import { writeFile } from 'node:fs/promises';
import { loadConfig } from '../src/core/config.js';
import { schema } from '../src/graphql/schema.js';
import { actionsGraphql, actionsYaml } from './hasura-actions.js';

/** Writes schema/hasura/actions.graphql and actions.yaml from the schema (REQUEST_DEADLINE_MS sets the timeout). */
const config = loadConfig();
await writeFile(new URL('../schema/hasura/actions.graphql', import.meta.url), actionsGraphql(schema));
await writeFile(new URL('../schema/hasura/actions.yaml', import.meta.url), actionsYaml(schema, config.requests.deadlineMs));
console.log('wrote schema/hasura/actions.graphql and schema/hasura/actions.yaml');
