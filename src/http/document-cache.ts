import type { DocumentNode, Token } from 'graphql';
import { LRUCache } from 'lru-cache';

/**
 * The parsed-document caches Yoga is given through its public `parserAndValidationCache` option
 * (yoga.ts): least-recently-used caches (`lru-cache`) bounded by the bytes their documents hold,
 * not by their count. Nothing here runs or replaces Yoga's parser; it only decides what is kept.
 */

/**
 * Heap bytes one parsed token holds (its Token, its share of the AST nodes and their locations),
 * measured on graphql 16 with documents from 9 to 1,000 tokens: 290 to 500. Rounded up.
 */
const BYTES_PER_TOKEN = 512;
/** A parse error: the GraphQLError with its location, beside the source it keeps. */
const BYTES_PER_ERROR = 2_048;
/** Parse errors get this share of DOCUMENT_CACHE_BYTES, parsed documents the rest. */
const ERROR_SHARE = 1 / 4;
/**
 * Longer texts are parsed every time, never kept: MAX_QUERY_TOKENS fits in far fewer characters,
 * so the rest of such a text is comments and blanks, cheap to read again and costly to keep
 * (3,000 distinct ones passing through a cache would each be kept long enough to burden the
 * garbage collector's old generation).
 */
export const CACHED_SOURCE_MAX_CHARS = 16_384;

type Cache<T extends object> = Pick<LRUCache<string, T>, 'get' | 'set'>;

/** An LRU cache that keeps only sources of at most CACHED_SOURCE_MAX_CHARS. */
function shortSourcesOnly<T extends object>(cache: LRUCache<string, T>): Cache<T> {
  return {
    get: (source) => (source.length > CACHED_SOURCE_MAX_CHARS ? undefined : cache.get(source)),
    set: (source, value) => (source.length > CACHED_SOURCE_MAX_CHARS ? cache : cache.set(source, value)),
  };
}

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
  documentCache: Cache<DocumentNode>;
  errorCache: Cache<object>;
}

/**
 * Yoga's parse and parse-error caches bounded by bytes, not entries (DOCUMENT_CACHE_BYTES): the
 * least recently used go first, and a text over CACHED_SOURCE_MAX_CHARS is never kept. The
 * validation results, costs and other findings per document are kept in WeakMaps keyed by the
 * parsed document, so they go with it. Null when the budget is 0: nothing is kept.
 */
export function documentCaches(budgetBytes: number): DocumentCaches | null {
  if (budgetBytes === 0) return null;
  const errorBytes = Math.max(1, Math.floor(budgetBytes * ERROR_SHARE));
  return {
    documentCache: shortSourcesOnly(
      new LRUCache<string, DocumentNode>({ maxSize: Math.max(1, budgetBytes - errorBytes), sizeCalculation: estimatedDocumentBytes }),
    ),
    errorCache: shortSourcesOnly(
      new LRUCache<string, object>({ maxSize: errorBytes, sizeCalculation: (_error, source) => sourceBytes(source) + BYTES_PER_ERROR }),
    ),
  };
}

/**
 * What the server knows of the documents it was sent: the parse caches (Yoga's
 * `parserAndValidationCache`), and each parsed document's validation result (kept by
 * src/http/plugins/validation-cache.ts). Nothing is known when DOCUMENT_CACHE_BYTES is 0.
 */
export interface KnownDocuments {
  caches: DocumentCaches | null;
  validations: WeakMap<DocumentNode, readonly unknown[]>;
}

export function knownDocuments(budgetBytes: number): KnownDocuments {
  return { caches: documentCaches(budgetBytes), validations: new WeakMap() };
}
