import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect } from 'node:net';

/**
 * What the kernel says about a running server's processes (Linux /proc): which HTTP processes a
 * primary forked, which of them holds a given connection, and whether a process or a whole
 * process group is still there. The server's own word (its log, its answers) is what the tests
 * check against these.
 */

/** The HTTP processes the primary forked. */
export function httpProcesses(primary: number): number[] {
  return readFileSync(`/proc/${primary}/task/${primary}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
}

/** Whether `pid` is a process that has not been reaped (a stopped one counts). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The pids whose process group is `pgid`, from /proc (a zombie not yet reaped counts: it still holds its pid). */
export function processGroupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The command may hold spaces and parentheses: the fields after its closing parenthesis are fixed.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid) members.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return members;
}

/** The inode of the server side of the TCP connection from `clientPort` to `serverPort` (IPv4 or IPv6 table). */
function serverSideInode(serverPort: number, clientPort: number): string | null {
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10) continue;
      const localPort = parseInt(fields[1]!.split(':')[1]!, 16);
      const remotePort = parseInt(fields[2]!.split(':')[1]!, 16);
      if (localPort === serverPort && remotePort === clientPort) return fields[9]!;
    }
  }
  return null;
}

function holdsSocket(pid: number, inode: string): boolean {
  try {
    return readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`;
      } catch {
        return false;
      }
    });
  } catch {
    return false;
  }
}

/**
 * Which of `pids` answers a request on a new connection: GET /health is sent, and once its answer
 * has begun, the process holding the server side of the connection is looked up. Null when none
 * of them holds it, or no answer came within `timeoutMs`.
 */
export async function answeringProcess(port: number, pids: number[], timeoutMs = 5_000): Promise<number | null> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  try {
    const answered = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), timeoutMs);
      socket.once('connect', () => socket.write('GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n'));
      socket.once('data', () => {
        clearTimeout(timer);
        resolve(true);
      });
      socket.once('close', () => {
        clearTimeout(timer);
        resolve(false);
      });
    });
    if (!answered) return null;
    const inode = serverSideInode(port, socket.localPort!);
    return inode === null ? null : (pids.find((pid) => holdsSocket(pid, inode)) ?? null);
  } finally {
    socket.destroy();
  }
}
