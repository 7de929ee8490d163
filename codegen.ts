import type { CodegenConfig } from '@graphql-codegen/cli';

/** Typed documents for the operations in schema/operations, used by the tests and the load tool. */
const config: CodegenConfig = {
  schema: 'schema/schema.graphql',
  documents: ['schema/operations/*.graphql'],
  ignoreNoDocuments: false,
  emitLegacyCommonJSImports: false,
  generates: {
    'test/generated/': {
      preset: 'client',
      // persisted-documents.json (hash -> document) is the manifest TRUSTED_DOCUMENTS reads.
      presetConfig: { fragmentMasking: false, gqlTagName: 'graphql', persistedDocuments: { hashAlgorithm: 'sha256' } },
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        scalars: { UUID: 'string', DateTime: 'string' },
        strictScalars: true,
      },
    },
  },
};

export default config;
