const GRAPHQL_MEDIA_TYPES = new Set(['application/json', 'application/graphql-response+json']);

/** POST bodies that execute: JSON only, which a cross-site form cannot send without a preflight. */
export function isGraphQLContentType(contentType: string | null): boolean {
  const mediaType = contentType?.split(';')[0]?.trim().toLowerCase();
  return mediaType !== undefined && GRAPHQL_MEDIA_TYPES.has(mediaType);
}

export class BodyTooLargeError extends Error {
  constructor(limit: number) {
    super(`The request body is larger than ${limit} bytes`);
    this.name = 'BodyTooLargeError';
  }
}

/**
 * Reads the body into memory, refusing more than `limit` bytes whether or not Content-Length was
 * sent, and returns an equivalent request whose body can be read again.
 */
export async function readLimitedBody(request: Request, limit: number): Promise<Request> {
  if (request.body === null) return request;
  const declared = Number(request.headers.get('content-length') ?? 'NaN');
  if (declared > limit) throw new BodyTooLargeError(limit);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = request.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new BodyTooLargeError(limit);
    }
    chunks.push(value);
  }
  return new Request(request.url, {
    method: request.method,
    headers: request.headers,
    body: Buffer.concat(chunks),
    signal: request.signal,
  });
}
