import SchemaBuilder from '@pothos/core';
import type { Context } from './context.js';

export const builder = new SchemaBuilder<{
  Context: Context;
  DefaultInputFieldRequiredness: true;
  DefaultFieldNullability: false;
  Scalars: {
    ID: { Input: string; Output: string };
    UUID: { Input: string; Output: string };
    DateTime: { Input: Date; Output: Date | string };
  };
}>({
  defaultInputFieldRequiredness: true,
  defaultFieldNullability: false,
});

builder.queryType({});
builder.mutationType({});
