import type { ExecutionResult, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { admissionKey, type Admission, type AdmissionKey } from '../../services/admission.js';
import type { OperationTurn } from '../../services/operation-turn.js';
import type { Context } from '../../graphql/context.js';
import { toGraphQLError } from '../../graphql/errors.js';
import type { Session } from '../../features/identity/session.js';
import { currentRequestScope } from '../../core/request-scope.js';

/** Who an operation runs for and by when, decided before its document is read: what the context is built from. */
interface Identified {
  session: Session | null;
  /** Epoch ms after which the request gives up. */
  deadline: number;
  /** The operation's turn, which a field may give back while it waits on someone outside (see OperationTurn). */
  turn: OperationTurn;
}

/** The server context the plugin leaves its decision in. */
export interface IdentifiedContext {
  identified?: Identified;
}

export interface AdmissionPluginOptions {
  admission: Admission;
  /** The request's session; throws for credentials that are presented and wrong. */
  identify: (request: Request, serverContext: IdentifiedContext) => Promise<Session | null>;
  /** What a thrown identification error becomes (the error contract's masking). */
  maskError: (error: unknown) => GraphQLError;
  requestDeadlineMs: number;
}

/** The caller's address, as the HTTP layer found it; in-process callers (tests) share one. */
const clientAddress = () => currentRequestScope()?.clientAddress ?? 'in-process';

/** A turn that may be given back and taken again (OperationTurn); `end` gives back whichever turn it holds. */
class AdmittedTurn implements OperationTurn {
  private release: (() => void) | null;
  private lost = false;

  constructor(
    private readonly admission: Admission,
    private readonly key: AdmissionKey,
    private readonly signal: AbortSignal,
    private readonly deadline: number,
    release: () => void,
  ) {
    this.release = release;
  }

  get held(): boolean {
    return !this.lost;
  }

  async stepOut<T>(wait: () => Promise<T>): Promise<{ value: T; back: boolean }> {
    this.end();
    let value: T;
    try {
      value = await wait();
    } finally {
      const admitted = await this.admission.admit(this.key, this.signal, this.deadline);
      if (admitted.ok) this.release = admitted.release;
      else this.lost = true;
    }
    return { value, back: !this.lost };
  }

  end(): void {
    this.release?.();
    this.release = null;
  }
}

/**
 * Runs an operation inside its turn: `run` is everything after admission (parse, validation,
 * costs, execution) and its result is the operation's; a refusal is a result with the error.
 */
export type AdmissionGate = <T>(
  request: Request,
  serverContext: IdentifiedContext,
  run: () => T | Promise<T>,
) => Promise<T | ExecutionResult>;

/**
 * Identity, then a turn, then everything else. Every GraphQL operation (on /graphql and /actions
 * alike) is identified first and takes its turn before its document is parsed, validated, costed
 * or executed, and gives the turn back when its result is ready, whatever the outcome: what a
 * client sends is read only in the share of the server its identity has (docs/design.md §8), so
 * callers without a session cannot make the server parse and validate ahead of its members.
 */
export function admissionGate(options: AdmissionPluginOptions): AdmissionGate {
  const { admission, identify, maskError, requestDeadlineMs } = options;
  return async <T>(request: Request, serverContext: IdentifiedContext, run: () => T | Promise<T>): Promise<T | ExecutionResult> => {
    const deadline = Date.now() + requestDeadlineMs;
    // Every database call the request makes, through the runners or not, is limited by this (src/db/transaction-mark.ts).
    const scope = currentRequestScope();
    if (scope) scope.deadline = deadline;
    let session: Session | null;
    try {
      session = await identify(request, serverContext);
    } catch (error) {
      return { errors: [maskError(error)] };
    }
    const key = admissionKey(session, clientAddress());
    const admitted = await admission.admit(key, request.signal, deadline);
    if (!admitted.ok) return { errors: [toGraphQLError(admitted.error)] };
    const turn = new AdmittedTurn(admission, key, request.signal, deadline, admitted.release);
    serverContext.identified = { session, deadline, turn };
    try {
      // A caller without a session reads its document only after the I/O already waiting
      // (other requests' database answers and bodies) has been served.
      if (session === null) await new Promise((resolve) => setImmediate(resolve));
      return await run();
    } finally {
      turn.end();
    }
  };
}

/** The gate on Yoga's parameters: every operation Yoga runs, on /graphql and /actions, passes it. */
export function useAdmission(gate: AdmissionGate): Plugin<Context> {
  return {
    onParams({ paramsHandler, setParamsHandler }) {
      setParamsHandler((payload) => gate(payload.request, payload.context as IdentifiedContext, () => paramsHandler(payload)));
    },
  };
}
