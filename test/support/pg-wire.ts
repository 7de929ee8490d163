import { startDelayProxy, throughProxy } from '../load/delay-proxy.js';

/** One exchange between the app and PostgreSQL: a simple query, or an extended one up to its Sync. */
export interface RoundTrip {
  /** `begin`, `commit`, `rollback` (the first word of a simple query), a prepared statement's name, or `sql: …` for an unnamed one. */
  statement: string;
  /** The client sent the statement's text (Parse) in this round trip: PostgreSQL parsed and planned it. */
  parsed: boolean;
}

/**
 * Reads the PostgreSQL frontend protocol a client sends, through a pass-through proxy: every
 * round trip the app makes, which statement it ran, and whether it sent the statement's text.
 * Only message framing is read: a type byte and a length, after the untyped startup message.
 */
export class WireTap {
  trips: RoundTrip[] = [];
  private readonly connections = new Map<number, { buffer: Buffer; started: boolean; statement: string; parsed: boolean; lastParse: string }>();

  reset(): void {
    this.trips = [];
  }

  read(connection: number, chunk: Buffer): void {
    const state = this.connections.get(connection) ?? { buffer: Buffer.alloc(0), started: false, statement: '', parsed: false, lastParse: '' };
    this.connections.set(connection, state);
    state.buffer = Buffer.concat([state.buffer, chunk]);
    for (;;) {
      const header = state.started ? 5 : 4;
      if (state.buffer.length < header) return;
      const length = state.started ? state.buffer.readInt32BE(1) + 1 : state.buffer.readInt32BE(0);
      if (state.buffer.length < length) return;
      const type = state.started ? String.fromCharCode(state.buffer[0]!) : '';
      const body = state.buffer.subarray(header, length);
      state.buffer = state.buffer.subarray(length);
      if (!state.started) {
        state.started = true;
        continue;
      }
      this.message(state, type, body);
    }
  }

  private message(state: { statement: string; parsed: boolean; lastParse: string }, type: string, body: Buffer) {
    const strings = () => body.toString('utf8').split('\0');
    if (type === 'Q') {
      this.trips.push({ statement: strings()[0]!.trim().split(/[\s;]/)[0]!.toLowerCase(), parsed: true });
    } else if (type === 'P') {
      const [name, text] = strings();
      state.parsed = true;
      state.lastParse = name || `sql: ${text!.replace(/\s+/g, ' ').trim()}`;
    } else if (type === 'B') {
      const [, statement] = strings();
      state.statement = statement || state.lastParse;
    } else if (type === 'S') {
      this.trips.push({ statement: state.statement, parsed: state.parsed });
      state.parsed = false;
    }
  }
}

/** A tap in front of the database `databaseUrl` names; connect to `url` to be read. */
export async function startWireTap(databaseUrl: string) {
  const tap = new WireTap();
  const target = new URL(databaseUrl);
  const proxy = await startDelayProxy({
    target: { host: target.hostname, port: Number(target.port) },
    delayMs: 0,
    onClientData: (connection, chunk) => tap.read(connection, chunk),
  });
  return { tap, url: throughProxy(databaseUrl, proxy.port), close: () => proxy.close() };
}
