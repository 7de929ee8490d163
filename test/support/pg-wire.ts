import { startDelayProxy, throughProxy } from '../load/delay-proxy.js';

/** One exchange between the app and PostgreSQL: a simple query, or an extended one up to its Sync. */
export interface RoundTrip {
  /** `begin`, `commit`, `rollback` (the first word of a simple query), a prepared statement's name, or `sql: …` for an unnamed one. */
  statement: string;
  /** The client sent the statement's text (Parse) in this round trip: PostgreSQL parsed and planned it. */
  parsed: boolean;
}

interface ConnectionState {
  buffer: Buffer;
  /** application_name from the startup message; null until it has been read. */
  application: string | null;
  statement: string;
  parsed: boolean;
  lastParse: string;
}

/**
 * Reads the PostgreSQL frontend protocol clients send, through a pass-through proxy: every round
 * trip of the connections named `application` (application_name), which statement it ran, and
 * whether it sent the statement's text. Only message framing is read: a type byte and a length,
 * after the untyped startup message (whose parameters name the application).
 */
export class WireTap {
  trips: RoundTrip[] = [];
  private readonly connections = new Map<number, ConnectionState>();

  constructor(private readonly application: string) {}

  reset(): void {
    this.trips = [];
  }

  read(connection: number, chunk: Buffer): void {
    const state = this.connections.get(connection) ?? {
      buffer: Buffer.alloc(0),
      application: null,
      statement: '',
      parsed: false,
      lastParse: '',
    };
    this.connections.set(connection, state);
    state.buffer = Buffer.concat([state.buffer, chunk]);
    for (;;) {
      const started = state.application !== null;
      const header = started ? 5 : 8;
      if (state.buffer.length < header) return;
      const length = started ? state.buffer.readInt32BE(1) + 1 : state.buffer.readInt32BE(0);
      if (state.buffer.length < length) return;
      const type = started ? String.fromCharCode(state.buffer[0]!) : '';
      const body = state.buffer.subarray(header, length);
      state.buffer = state.buffer.subarray(length);
      if (!started) {
        // Startup: protocol version, then name/value pairs, each ending in a zero byte.
        const pairs = body.toString('utf8').split('\0');
        const at = pairs.indexOf('application_name');
        state.application = at >= 0 ? (pairs[at + 1] ?? '') : '';
      } else if (state.application === this.application) {
        this.message(state, type, body);
      }
    }
  }

  private message(state: ConnectionState, type: string, body: Buffer) {
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

/** A tap in front of the database `databaseUrl` names; connections to `url` named `application` are read. */
export async function startWireTap(databaseUrl: string, application: string) {
  const tap = new WireTap(application);
  const target = new URL(databaseUrl);
  const proxy = await startDelayProxy({
    target: { host: target.hostname, port: Number(target.port) },
    delayMs: 0,
    onClientData: (connection, chunk) => tap.read(connection, chunk),
  });
  return { tap, url: throughProxy(databaseUrl, proxy.port), close: () => proxy.close() };
}
