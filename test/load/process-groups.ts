/**
 * The bench's server process groups, one running at a time. Every server (and the delay proxy) a
 * bench starts stays up for the whole run, so that each keeps what V8 compiled of its hot path, but
 * only the group of the row being measured runs: every other is stopped (SIGSTOP) and takes no CPU,
 * wakes no timer and collects no garbage while another row is measured, and is continued (SIGCONT)
 * when a row of its own comes. A dozen idle servers each running its timers and collections on the
 * same two cores disturbed the rows measured beside them.
 */
export class ProcessGroups {
  private readonly known = new Set<number>();
  private running = new Set<number>();

  /** A process started for the bench: stopped until a row runs on it. */
  add(pid: number): void {
    this.known.add(pid);
    this.running.add(pid);
    this.runOnly([...this.running].filter((p) => p !== pid));
  }

  /** Continues `pids` and stops every other process of the bench's: the row about to run uses these alone. */
  runOnly(pids: number[]): void {
    const wanted = new Set(pids);
    for (const pid of this.known) {
      if (wanted.has(pid) === this.running.has(pid)) continue;
      signal(pid, wanted.has(pid) ? 'SIGCONT' : 'SIGSTOP');
    }
    this.running = new Set([...this.known].filter((pid) => wanted.has(pid)));
  }

  /** Continues every process: a stopped one would not act on the SIGTERM that ends it. */
  continueAll(): void {
    this.runOnly([...this.known]);
  }
}

/** Signals a process of the bench's; one that is gone already has nothing to stop or continue. */
function signal(pid: number, name: 'SIGSTOP' | 'SIGCONT'): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
