/**
 * An implementation that tests and the benchmark may put a stand-in in place of: the naive version
 * of an algorithm (a concurrency test shows that it fails, which is how we know the test can) or a
 * peer design (the benchmark measures against it). Production code calls `current`; the request
 * context and the services know nothing of it.
 */
export class Replaceable<T> {
  #current: T;

  constructor(readonly original: T) {
    this.#current = original;
  }

  get current(): T {
    return this.#current;
  }

  /** Puts `standIn` in place of the original; the returned function puts the original back. */
  replaceWith(standIn: T): () => void {
    this.#current = standIn;
    return () => {
      this.#current = this.original;
    };
  }
}
