import { tryAgain } from '../../src/core/errors.js';
import {
  FairAdmission,
  type Admission,
  type AdmissionKey,
  type AdmissionOptions,
  type AdmissionStats,
  type Admitted,
} from '../../src/services/admission.js';

/**
 * The naive admission: one first-come line for every tenant, bounded like each tenant's line of
 * the real one. A tenant that floods fills the line, and everyone else is turned away with it.
 */
export class FifoAdmission implements Admission {
  private inFlight = 0;
  private readonly line: (() => void)[] = [];

  constructor(private readonly options: AdmissionOptions) {}

  stats(): AdmissionStats {
    return { inFlight: this.inFlight, queued: this.line.length };
  }

  async admit(_key: AdmissionKey, _signal: AbortSignal, deadline: number): Promise<Admitted> {
    if (this.inFlight < this.options.capacity && this.line.length === 0) return this.start();
    if (this.line.length >= this.options.queueMax) {
      return { ok: false, error: tryAgain('The server is busy; resend the request', { reason: 'shed', retryAfterMs: 100 }) };
    }
    return new Promise<Admitted>((resolve) => {
      const turn = () => {
        clearTimeout(timer);
        resolve(this.start());
      };
      const timer = setTimeout(
        () => {
          this.line.splice(this.line.indexOf(turn), 1);
          resolve({ ok: false, error: tryAgain('The server is busy; resend the request', { reason: 'busy', retryAfterMs: 100 }) });
        },
        Math.min(this.options.maxWaitMs, deadline - Date.now()),
      );
      this.line.push(turn);
    });
  }

  private start(): Admitted {
    this.inFlight++;
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.inFlight--;
        if (this.inFlight < this.options.capacity) this.line.shift()?.();
      },
    };
  }
}

/**
 * Fair between tenants, first come inside a tenant: the real admission with every member of a
 * group standing in one line. A member who floods fills the tenant's line, and the tenant's other
 * members are turned away with them.
 */
export class TenantOnlyAdmission implements Admission {
  private readonly inner: FairAdmission;

  constructor(options: AdmissionOptions) {
    this.inner = new FairAdmission(options);
  }

  stats(): AdmissionStats {
    return this.inner.stats();
  }

  admit(key: AdmissionKey, signal: AbortSignal, deadline: number): Admitted | Promise<Admitted> {
    return this.inner.admit({ group: key.group, member: key.group }, signal, deadline);
  }
}
