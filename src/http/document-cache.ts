import type { DocumentNode, Token } from 'graphql';
import { LRUCache } from 'lru-cache';

/**
 * Heap bytes one parsed token holds (its Token, its share of the AST nodes and their locations),
 * measured on graphql 16 with documents from 9 to 1,000 tokens: 290 to 500. Rounded up.
 */
export const BYTES_PER_TOKEN = 512;
/** A parse error: the GraphQLError with its location, beside the source it keeps. */
const BYTES_PER_ERROR = 2_048;
/** Parse errors get this share of DOCUMENT_CACHE_BYTES, parsed documents the rest. */
const ERROR_SHARE = 1 / 4;

function tokenCount(document: DocumentNode): number {
  let count = 0;
  for (let token: Token | null = document.loc?.startToken ?? null; token !== null; token = token.next) count++;
  return count;
}

/** A string's heap bytes at most: V8 keeps two bytes per character unless all are Latin-1. */
const sourceBytes = (source: string) => 2 * source.length;

/** What a cached document holds: its source (the key) and its tree. */
export function estimatedDocumentBytes(document: DocumentNode, source: string): number {
  return sourceBytes(source) + BYTES_PER_TOKEN * Math.max(1, tokenCount(document));
}

export interface DocumentCaches {
  documentCache: LRUCache<string, DocumentNode>;
  errorCache: LRUCache<string, object>;
}

/**
 * Yoga's parse and parse-error caches bounded by bytes, not entries (DOCUMENT_CACHE_BYTES): the
 * least recently used go first, and a document heavier than the whole budget is never kept. The
 * validation results, costs and other findings per document are kept in WeakMaps keyed by the
 * parsed document, so they go with it. Null when the budget is 0: nothing is kept.
 */
export function documentCaches(budgetBytes: number): DocumentCaches | null {
  if (budgetBytes === 0) return null;
  const errorBytes = Math.max(1, Math.floor(budgetBytes * ERROR_SHARE));
  return {
    documentCache: new LRUCache<string, DocumentNode>({
      maxSize: Math.max(1, budgetBytes - errorBytes),
      sizeCalculation: estimatedDocumentBytes,
    }),
    errorCache: new LRUCache<string, object>({
      maxSize: errorBytes,
      sizeCalculation: (_error, source) => sourceBytes(source) + BYTES_PER_ERROR,
    }),
  };
}
