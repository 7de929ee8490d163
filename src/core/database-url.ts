/**
 * DATABASE_URL in libpq's forms: one host, or several tried in order, as an HA setup hands them
 * out (`postgres://app:pw@db1:5432,db2:5432/app?target_session_attrs=read-write`). `pg` reads one
 * host only, so the URL is split here into one single-host URL per host for the driver, and
 * `target_session_attrs` is kept for the connection factory (src/db/client.ts) instead of `pg`.
 */

export interface DatabaseHost {
  host: string;
  port: number;
  /** The single-host URL `pg` connects with. */
  url: string;
}

/**
 * libpq's `target_session_attrs`, the values a server that writes can use: `any` takes the first
 * host that answers; `read-write` the first whose sessions accept writes (`transaction_read_only`
 * off); `primary` the first that is not in recovery (a standby).
 */
type SessionTarget = 'any' | 'read-write' | 'primary';

export interface DatabaseTarget {
  hosts: DatabaseHost[];
  target: SessionTarget;
  database: string;
}

export class DatabaseUrlError extends Error {
  override name = 'DatabaseUrlError';
}

const SESSION_TARGETS: readonly SessionTarget[] = ['any', 'read-write', 'primary'];
const DEFAULT_PORT = 5432;
/** scheme, user info, host list, path, query; the fragment is ignored as libpq ignores it. */
const URL_PARTS = /^(postgres(?:ql)?:)\/\/(?:([^@/?#]*)@)?([^/?#]*)([^?#]*)(\?[^#]*)?(?:#.*)?$/i;

function parseHost(item: string, fallbackPort: number): { host: string; port: number } {
  const bracketed = /^\[([^\]]+)\](?::(\d*))?$/.exec(item);
  const [, host = '', port = ''] = bracketed ?? /^([^:]*)(?::(\d*))?$/.exec(item) ?? [];
  if (!bracketed && item.split(':').length > 2)
    throw new DatabaseUrlError(`"${item}" is not host:port (write an IPv6 address as [addr]:port)`);
  if (port !== '' && !/^\d+$/.test(port)) throw new DatabaseUrlError(`"${item}" has a port that is not a number`);
  const number = port === '' ? fallbackPort : Number(port);
  if (number < 1 || number > 65_535) throw new DatabaseUrlError(`"${item}" has a port outside 1 to 65535`);
  return { host: decodeURIComponent(host), port: number };
}

/** Parses DATABASE_URL; a wrong one throws DatabaseUrlError saying what is wrong (never the password). */
export function parseDatabaseUrl(raw: string): DatabaseTarget {
  const parts = URL_PARTS.exec(raw.trim());
  if (!parts) {
    const scheme = /^([a-z][a-z0-9+.-]*:)/i.exec(raw)?.[1];
    throw new DatabaseUrlError(
      scheme && !/^postgres(ql)?:$/i.test(scheme)
        ? `expected a postgres:// URL, got the scheme "${scheme}"`
        : 'not a URL (expected postgres://user:password@host:port/database)',
    );
  }
  const [, scheme = 'postgres:', userInfo, hostList = '', path = '', query = ''] = parts;
  const params = new URLSearchParams(query.slice(1));
  const target = (params.get('target_session_attrs') ?? 'any') as SessionTarget;
  if (!SESSION_TARGETS.includes(target)) {
    throw new DatabaseUrlError(`target_session_attrs=${target} is not supported: this server writes, so use ${SESSION_TARGETS.join(', ')}`);
  }
  params.delete('target_session_attrs');
  const defaultPort = params.has('port') ? Number(params.get('port')) : DEFAULT_PORT;
  if (!Number.isInteger(defaultPort) || defaultPort < 1 || defaultPort > 65_535)
    throw new DatabaseUrlError('the port parameter is not a port');
  const rest = params.toString();
  const tail = `${path}${rest ? `?${rest}` : ''}`;
  const userPart = userInfo === undefined ? '' : `${userInfo}@`;
  const items = hostList.split(',');
  if (items.length > 1 && items.some((item) => item === '')) throw new DatabaseUrlError('an empty host in the list of hosts');
  const hosts = items.map((item) => {
    const { host, port } = parseHost(item, defaultPort);
    const authority = host === '' ? '' : `${host.includes(':') ? `[${host}]` : encodeURIComponent(host)}:${port}`;
    const url = `${scheme}//${userPart}${authority}${tail}`;
    // What pg will parse: a URL that the WHATWG parser refuses would fail later, at connect time.
    try {
      new URL(url);
    } catch {
      throw new DatabaseUrlError(`"${item}" is not a host name or address`);
    }
    return { host: host === '' ? (params.get('host') ?? 'localhost') : host, port, url };
  });
  let user = '';
  try {
    user = decodeURIComponent((userInfo ?? '').split(':')[0] ?? '');
  } catch {
    throw new DatabaseUrlError('the user name is not URL-encoded correctly');
  }
  let database = '';
  try {
    database = decodeURIComponent(path.replace(/^\//, ''));
  } catch {
    throw new DatabaseUrlError('the database name is not URL-encoded correctly');
  }
  return { hosts, target, database: database || user };
}

/** Where the URL points, for log lines and messages: `db1:5432,db2:5432/app` (never the password). */
export function describeTarget(target: DatabaseTarget): string {
  return `${target.hosts.map(hostLabel).join(',')}/${target.database}`;
}

export function hostLabel(host: Pick<DatabaseHost, 'host' | 'port'>): string {
  return `${host.host.includes(':') ? `[${host.host}]` : host.host}:${host.port}`;
}
