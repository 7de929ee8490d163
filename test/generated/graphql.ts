/* eslint-disable */
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
export type Maybe<T> = T | null;
export type InputMaybe<T> = Maybe<T>;
export type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
export type MakeOptional<T, K extends keyof T> = Omit<T, K> & { [SubKey in K]?: Maybe<T[SubKey]> };
export type MakeMaybe<T, K extends keyof T> = Omit<T, K> & { [SubKey in K]: Maybe<T[SubKey]> };
export type MakeEmpty<T extends { [key: string]: unknown }, K extends keyof T> = { [_ in K]?: never };
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
/** All built-in and custom scalars, mapped to their actual values */
export type Scalars = {
  ID: { input: string; output: string; }
  String: { input: string; output: string; }
  Boolean: { input: boolean; output: boolean; }
  Int: { input: number; output: number; }
  Float: { input: number; output: number; }
  /** An instant as an ISO-8601 string in UTC, e.g. 2026-10-01T03:00:00.000Z. */
  DateTime: { input: string; output: string; }
  /** A UUID in its canonical 36-character form. */
  UUID: { input: string; output: string; }
};

export type Contract = {
  __typename?: 'Contract';
  createdAt: Scalars['DateTime']['output'];
  /** Documents in number order. */
  documents: Array<ContractDocument>;
  id: Scalars['UUID']['output'];
  title: Scalars['String']['output'];
};

export type ContractDocument = {
  __typename?: 'ContractDocument';
  contractId: Scalars['UUID']['output'];
  createdAt: Scalars['DateTime']['output'];
  /** Per-tenant document number: from 10000000, never repeated, never skipped. */
  docNumber: Scalars['Int']['output'];
  id: Scalars['UUID']['output'];
};

export type CreateContractDocumentInput = {
  contractId: Scalars['UUID']['input'];
};

export type CreateContractDocumentPayload = {
  __typename?: 'CreateContractDocumentPayload';
  document: ContractDocument;
};

export type CreateContractInput = {
  /** 1 to 200 characters. */
  title: Scalars['String']['input'];
};

export type CreateContractPayload = {
  __typename?: 'CreateContractPayload';
  contract: Contract;
};

export type CreateTenantInput = {
  /** 1 to 64 letters, digits, "_" or "-"; the x-hasura-tenant-id of its sessions. */
  id: Scalars['ID']['input'];
  monthlyCapYen?: InputMaybe<Scalars['Int']['input']>;
  name: Scalars['String']['input'];
};

export type CreateTenantPayload = {
  __typename?: 'CreateTenantPayload';
  tenant: Tenant;
};

export type Mutation = {
  __typename?: 'Mutation';
  /** Creates a contract in the session's tenant. */
  createContract: CreateContractPayload;
  /** Issues the contract's next document with the tenant's next number. A contract of another tenant is NOT_FOUND. */
  createContractDocument: CreateContractDocumentPayload;
  /** Creates a tenant. Platform operator only (role admin without a tenant id). */
  createTenant: CreateTenantPayload;
};


export type MutationCreateContractArgs = {
  input: CreateContractInput;
};


export type MutationCreateContractDocumentArgs = {
  input: CreateContractDocumentInput;
};


export type MutationCreateTenantArgs = {
  input: CreateTenantInput;
};

export type Query = {
  __typename?: 'Query';
  /** A contract of the session's tenant, or null. */
  contract?: Maybe<Contract>;
  /** The session's tenant's newest contracts. */
  contracts: Array<Contract>;
  /** The session's tenant. */
  tenant?: Maybe<Tenant>;
  /** The session of this request, or null when anonymous. */
  viewer?: Maybe<Viewer>;
};


export type QueryContractArgs = {
  id: Scalars['UUID']['input'];
};


export type QueryContractsArgs = {
  first?: InputMaybe<Scalars['Int']['input']>;
};

export type Tenant = {
  __typename?: 'Tenant';
  createdAt: Scalars['DateTime']['output'];
  id: Scalars['ID']['output'];
  /** A member's coupon total per calendar month, in yen. */
  monthlyCapYen: Scalars['Int']['output'];
  name: Scalars['String']['output'];
};

/** Who the server thinks is calling: handy for checking headers in GraphiQL. */
export type Viewer = {
  __typename?: 'Viewer';
  role: Scalars['String']['output'];
  tenantId?: Maybe<Scalars['String']['output']>;
  userId?: Maybe<Scalars['String']['output']>;
};

export type CreateTenantMutationVariables = Exact<{
  input: CreateTenantInput;
}>;


export type CreateTenantMutation = { __typename?: 'Mutation', createTenant: { __typename?: 'CreateTenantPayload', tenant: { __typename?: 'Tenant', id: string, name: string, monthlyCapYen: number, createdAt: string } } };

export type CreateContractMutationVariables = Exact<{
  input: CreateContractInput;
}>;


export type CreateContractMutation = { __typename?: 'Mutation', createContract: { __typename?: 'CreateContractPayload', contract: { __typename?: 'Contract', id: string, title: string, createdAt: string } } };

export type CreateContractDocumentMutationVariables = Exact<{
  input: CreateContractDocumentInput;
}>;


export type CreateContractDocumentMutation = { __typename?: 'Mutation', createContractDocument: { __typename?: 'CreateContractDocumentPayload', document: { __typename?: 'ContractDocument', id: string, contractId: string, docNumber: number, createdAt: string } } };

export type ContractQueryVariables = Exact<{
  id: Scalars['UUID']['input'];
}>;


export type ContractQuery = { __typename?: 'Query', contract?: { __typename?: 'Contract', id: string, title: string, documents: Array<{ __typename?: 'ContractDocument', id: string, contractId: string, docNumber: number }> } | null };

export type ViewerQueryVariables = Exact<{ [key: string]: never; }>;


export type ViewerQuery = { __typename?: 'Query', viewer?: { __typename?: 'Viewer', role: string, tenantId?: string | null, userId?: string | null } | null };


export const CreateTenantDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateTenant"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateTenantInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createTenant"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"tenant"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"name"}},{"kind":"Field","name":{"kind":"Name","value":"monthlyCapYen"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]}}]}}]} as unknown as DocumentNode<CreateTenantMutation, CreateTenantMutationVariables>;
export const CreateContractDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateContract"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateContractInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createContract"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"contract"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"title"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]}}]}}]} as unknown as DocumentNode<CreateContractMutation, CreateContractMutationVariables>;
export const CreateContractDocumentDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateContractDocument"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"input"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CreateContractDocumentInput"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"createContractDocument"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"input"},"value":{"kind":"Variable","name":{"kind":"Name","value":"input"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"document"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"contractId"}},{"kind":"Field","name":{"kind":"Name","value":"docNumber"}},{"kind":"Field","name":{"kind":"Name","value":"createdAt"}}]}}]}}]}}]} as unknown as DocumentNode<CreateContractDocumentMutation, CreateContractDocumentMutationVariables>;
export const ContractDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Contract"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"id"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"UUID"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"contract"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"id"},"value":{"kind":"Variable","name":{"kind":"Name","value":"id"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"title"}},{"kind":"Field","name":{"kind":"Name","value":"documents"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"id"}},{"kind":"Field","name":{"kind":"Name","value":"contractId"}},{"kind":"Field","name":{"kind":"Name","value":"docNumber"}}]}}]}}]}}]} as unknown as DocumentNode<ContractQuery, ContractQueryVariables>;
export const ViewerDocument = {"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"Viewer"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"viewer"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"role"}},{"kind":"Field","name":{"kind":"Name","value":"tenantId"}},{"kind":"Field","name":{"kind":"Name","value":"userId"}}]}}]}}]} as unknown as DocumentNode<ViewerQuery, ViewerQueryVariables>;