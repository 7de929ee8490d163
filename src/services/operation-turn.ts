/**
 * An operation's turn as its fields see it. A field that waits on someone outside the database (a
 * checkout on its payment provider) gives the turn back meanwhile: MAX_IN_FLIGHT bounds database
 * work, not waiting on others.
 */
export interface OperationTurn {
  /**
   * Gives the turn back while `wait` runs, then waits for one again, in the member's line like any
   * operation; `back` is false when none came (the line was full, or the deadline passed).
   */
  stepOut<T>(wait: () => Promise<T>): Promise<{ value: T; back: boolean }>;
  /** False once a turn given back did not come back: the operation must do no more database work. */
  readonly held: boolean;
}

/** The turn of work that admission did not admit (the bare server of the benchmark, which calls a unit of work without admission): nothing to give back. */
export const UNGATED_TURN: OperationTurn = {
  held: true,
  stepOut: async (wait) => ({ value: await wait(), back: true }),
};
