/**
 * The noisy neighbours of the `stalled-downloads` scenario (docs/performance.md, "Noisy
 * neighbours"): other apps open statement downloads of a big closed day and never read them, over
 * and over (each opener opens a new download every OPEN_EVERY_MS and keeps every one admitted
 * without reading it, up to HELD_PER_OPENER connections), while the normal merchant's paced
 * queries and creates are measured. Reports what the openers got: downloads admitted (200),
 * refused (429), and the bytes they took. In the `reading-downloads` scenario the openers read
 * instead: each downloads the day's file whole, then the next at once (one at a time per opener),
 * so that statement files are being made all along beside the merchant's requests.
 */
import { randomBytes, sign } from 'node:crypto';
import net from 'node:net';
import { PaymentClient, parsePlatformKeysJson, requestSigningString } from '@mps/sdk';
import type { Provisioned, Service } from './service.ts';
import { seed } from './statement.ts';

export interface Neighbours {
  apps: Provisioned[];
  day: string;
  payments: number;
}

/**
 * The neighbours: `apps` apps, each with a closed day of `payments` payments written straight into
 * the database (as the statement scenario does) and its summary made once (so that what they hold
 * below is downloads).
 */
export async function prepareNeighbours(svc: Service, apps: number, payments: number, log: (m: string) => void): Promise<Neighbours> {
  const day = new Date(Date.now() + 8 * 3600_000 - 2 * 86_400_000).toISOString().slice(0, 10);
  const keys = parsePlatformKeysJson(JSON.stringify((await svc.admin<unknown>('GET', '/platform-keys')).body));
  const out: Provisioned[] = [];
  for (let i = 0; i < apps; i++) {
    const app = await svc.provision({});
    await seed(svc, app, day, payments, () => {}, `nb${i}x`);
    const client = new PaymentClient({ ...app, baseUrl: svc.baseUrl, platformPublicKeys: keys, timeoutMs: 600_000, maxRetries: 0 });
    await client.getStatement(day);
    out.push(app);
  }
  log(`stalled-downloads: ${apps} neighbour apps with ${payments} payments each on ${day}, their summaries made`);
  return { apps: out, day, payments };
}

export interface StalledStats {
  openers: number;
  opened: number;
  admitted: number;
  refused: number;
  otherStatuses: Record<string, number>;
  bytes: number;
  /** Downloads read to their end (reading openers). */
  completed?: number;
}

/** Each opener opens a download this often ... */
const OPEN_EVERY_MS = 500;
/** ... and holds at most this many, unread, each for HOLD_MS (past the service's default stall timeout). */
const HELD_PER_OPENER = 8;
const HOLD_MS = 45_000;

function signedHead(app: Provisioned, path: string, host: string, close = false): string {
  const ts = String(Math.floor(Date.now() / 1000));
  const nonce = randomBytes(16).toString('hex');
  const requestId = `req_${randomBytes(8).toString('hex')}`;
  const s = requestSigningString({
    method: 'GET',
    target: path,
    appId: app.appId,
    keyId: app.keyId,
    timestamp: ts,
    nonce,
    requestId,
    contentType: undefined,
    body: '',
  });
  const h: Record<string, string> = {
    Host: host,
    'X-SVC-App-Id': app.appId,
    'X-SVC-Key-Id': app.keyId,
    'X-SVC-Timestamp': ts,
    'X-SVC-Nonce': nonce,
    'X-SVC-Request-Id': requestId,
    'X-SVC-Sign': sign('sha256', Buffer.from(s), app.privateKeyPem).toString('base64'),
    ...(close ? { Connection: 'close' } : {}),
  };
  return `GET ${path} HTTP/1.1\r\n${Object.entries(h)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
}

/**
 * Starts `perApp` openers for each app, downloading `day`'s file and reading nothing past the
 * answer's first bytes (`read`: reading each download whole, then opening the next). `stop` ends
 * them and answers their figures.
 */
export function startStalledDownloads(
  baseUrl: string,
  apps: Provisioned[],
  day: string,
  perApp: number,
  read = false,
): { stop: () => Promise<StalledStats> } {
  const { hostname, port } = new URL(baseUrl);
  const path = `/api/open/v1/statements/${day}/file`;
  const stats: StalledStats = { openers: apps.length * perApp, opened: 0, admitted: 0, refused: 0, otherStatuses: {}, bytes: 0 };
  if (read) stats.completed = 0;
  let stopping = false;
  const sockets = new Set<net.Socket>();

  const open = (app: Provisioned, held: Set<net.Socket>) => {
    const socket = net.connect(Number(port), hostname);
    sockets.add(socket);
    held.add(socket);
    stats.opened++;
    let first = true;
    socket.on('error', () => {});
    socket.on('data', (chunk: Buffer) => {
      stats.bytes += chunk.length;
      if (!first) return;
      first = false;
      const status = /^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1', 0, 16))?.[1] ?? '?';
      if (status === '200') {
        stats.admitted++;
        if (read) return; // read to its end (the service closes the connection after the answer)
        socket.pause(); // and never read again: given up (closed) after HOLD_MS
        setTimeout(() => socket.destroy(), HOLD_MS).unref();
      } else {
        if (status === '429') stats.refused++;
        else stats.otherStatuses[status] = (stats.otherStatuses[status] ?? 0) + 1;
        socket.destroy();
      }
    });
    socket.on('end', () => {
      if (read && !first) stats.completed!++;
    });
    socket.on('close', () => {
      sockets.delete(socket);
      held.delete(socket);
      if (read && !stopping) open(app, held);
    });
    socket.on('connect', () => socket.write(signedHead(app, path, hostname, read)));
  };

  const timers: NodeJS.Timeout[] = [];
  for (const app of apps) {
    for (let i = 0; i < perApp; i++) {
      const held = new Set<net.Socket>();
      timers.push(
        setInterval(() => {
          if (!stopping && held.size < (read ? 1 : HELD_PER_OPENER)) open(app, held);
        }, OPEN_EVERY_MS),
      );
    }
  }
  return {
    stop: async () => {
      stopping = true;
      for (const t of timers) clearInterval(t);
      for (const s of sockets) s.destroy();
      return stats;
    },
  };
}
