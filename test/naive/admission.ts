import { tryAgain } from '../../src/errors.js';
import type { Admission, AdmissionOptions, AdmissionStats, Admitted } from '../../src/admission.js';

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

  async admit(_tenant: string, _signal: AbortSignal, deadline: number): Promise<Admitted> {
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
