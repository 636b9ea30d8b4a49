#!/usr/bin/env node
/**
 * mps-merchant: the SDK from a shell. Exit codes: 0 success, 1 the call or the verification
 * failed (details as JSON on stderr), 2 the command line is wrong.
 */
import { createWriteStream } from 'node:fs';
import { createServer } from 'node:http';
import { chmod, mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { assertRequestId } from './auth.ts';
import { createFetchTransport, PaymentClient } from './client.ts';
import { MpsError, NotificationVerificationError, PaymentApiError } from './errors.ts';
import { DEFAULT_RSA_BITS, generateRsaKeyPair, loadPublicKeys, parsePlatformKeysJson } from './keys.ts';
import type { CreateOrderResponse, CreateRefundResponse, EventFilter } from './types.ts';
import { verifyNotification } from './webhooks.ts';

const USAGE = `Usage: mps-merchant <command> [options]

Commands:
  keygen --out-dir DIR [--bits 2048] [--force]
                          write merchant-private.pem (PKCS#8, mode 0600) and merchant-public.pem (SPKI)
  create-order  --json '{...}' | --file FILE     POST /api/open/v1/payments
  recreate-attempt OUT_TRADE_NO                  POST /api/open/v1/payments/{outTradeNo}/attempts
  query-order   OUT_TRADE_NO                     GET  /api/open/v1/payments/{outTradeNo}
  close-order   OUT_TRADE_NO                     POST /api/open/v1/payments/{outTradeNo}/close
  create-refund --json '{...}' | --file FILE     POST /api/open/v1/refunds
  query-refund  OUT_REFUND_NO                    GET  /api/open/v1/refunds/{outRefundNo}
  settlement                                     GET  /api/open/v1/settlement/accounts
  statement DAY [--gzip] [--out FILE]            GET  /api/open/v1/statements/{DAY} (YYYY-MM-DD, Asia/Shanghai):
                          the summary (totals, SHA-256, size); with --out, the file too, written to FILE
                          once its size, SHA-256 and signature are checked (nothing is left on failure)
  events [--type T] [--status S] [--from TIME] [--to TIME] [--limit N] [--cursor C] [--all]
                                                 GET  /api/open/v1/events: your events, newest first;
                          --all follows the pages and prints every event
  events get EVENT_ID                            GET  /api/open/v1/events/{eventId} with its delivery attempts
  events redeliver EVENT_ID                      POST /api/open/v1/events/{eventId}/redeliveries
  sandbox pay   OUT_TRADE_NO                     the sandbox's buyer pays the order: looks it up with
                          GET /api/open/v1/payments/{outTradeNo} (signed), then calls
                          POST /api/sandbox/v1/payments/{openOrderId}/pay with the admin token
                          (a service running the sandbox provider only)
  verify-notification --headers FILE --body FILE [--tolerance-seconds 300]
                          FILE of --headers: a JSON object of header names to values;
                          --body: the raw body bytes; needs the platform keys
  listen [--url URL] [--count N] [--tolerance-seconds 300]
                          a receiver for your app's notifications at URL (default MPS_NOTIFY_URL, which
                          provisioning writes, else http://127.0.0.1:9000/hook): verifies each with the
                          platform keys, prints one line per event ("verified TYPE OUT_TRADE_NO
                          stateVersion=N {payload}", each eventId once) and answers 204; one that does
                          not verify is answered 400 (the platform retries it) and reported on stderr.
                          Runs until Ctrl-C, or until N events were verified (--count)

Options of the API commands (environment variable in brackets):
  --base-url URL          platform address                        [MPS_BASE_URL]
  --app-id ID             svcop_ + 16 letters or digits           [MPS_APP_ID]
  --key-id ID             id of your registered public key        [MPS_KEY_ID]
  --private-key FILE      your private key (PEM)                  [MPS_PRIVATE_KEY_FILE]
  --platform-keys FILE    platform public keys, JSON as GET /api/admin/v1/platform-keys
                          returns it: {"keys":[{"keyId","publicKeyPem"}]} [MPS_PLATFORM_KEYS_FILE]
  --platform-key KEYID=FILE | FILE
                          one platform public key (PEM); repeatable; the bare FILE form
                          takes its key id from --platform-key-id
  --platform-key-id ID
  --request-id ID         X-SVC-Request-Id (8-128 of A-Za-z0-9._:-); reuse it to retry safely
  --timeout-ms N          per try (default 15000)
  --max-retries N         on network errors, 429 and 503 (default 2)
  --json JSON | --file FILE   request body of create-order / create-refund (--file - reads stdin)
  --admin-token TOKEN     bearer token of the sandbox helpers     [ADMIN_TOKEN]
  --url URL               listen: where the notifications come    [MPS_NOTIFY_URL]
  -h, --help

Without platform keys, response signatures are not verified (a warning is printed).
Output: the JSON response body on stdout and exit 0 on 2xx; otherwise the error envelope on stderr
and exit 1. Exit 2: the command line is wrong, or a key or body file it names cannot be read or
used (missing, unreadable, not a PEM key of the right kind).
`;

const API_COMMANDS = new Set([
  'create-order',
  'recreate-attempt',
  'query-order',
  'close-order',
  'create-refund',
  'query-refund',
  'settlement',
  'statement',
  'events',
]);

class UsageError extends Error {
  override name = 'UsageError';
}

const OPTIONS = {
  'out-dir': { type: 'string' },
  bits: { type: 'string' },
  force: { type: 'boolean' },
  json: { type: 'string' },
  file: { type: 'string' },
  'base-url': { type: 'string' },
  'app-id': { type: 'string' },
  'key-id': { type: 'string' },
  'private-key': { type: 'string' },
  'platform-keys': { type: 'string' },
  'platform-key': { type: 'string', multiple: true },
  'platform-key-id': { type: 'string' },
  'request-id': { type: 'string' },
  'timeout-ms': { type: 'string' },
  'max-retries': { type: 'string' },
  headers: { type: 'string' },
  body: { type: 'string' },
  'tolerance-seconds': { type: 'string' },
  'admin-token': { type: 'string' },
  gzip: { type: 'boolean' },
  out: { type: 'string' },
  type: { type: 'string' },
  status: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  all: { type: 'boolean' },
  url: { type: 'string' },
  count: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

function required(value: string | undefined, what: string): string {
  if (value === undefined || value === '') throw new UsageError(`${what} is required`);
  return value;
}

function integer(value: string | undefined, what: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[0-9]+$/.test(value)) throw new UsageError(`${what} must be a non-negative integer`);
  return Number(value);
}

async function readBytes(file: string): Promise<Buffer> {
  if (file === '-') {
    const chunks: Buffer[] = [];
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks);
  }
  return readNamedBytes(file, 'file');
}

/** The bytes of a file named on the command line; one that cannot be read is a wrong command line (exit 2). */
async function readNamedBytes(file: string, what: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw new UsageError(`${what} ${JSON.stringify(file)} cannot be read (${e.code ?? e.message})`);
  }
}

async function readNamedFile(file: string, what = 'file'): Promise<string> {
  return (await readNamedBytes(file, what)).toString('utf8');
}

/** Platform keys from --platform-keys / --platform-key, else MPS_PLATFORM_KEYS_FILE; undefined when none. */
async function platformKeys(values: Values): Promise<Record<string, string> | undefined> {
  const keys: Record<string, string> = {};
  let any = false;
  const jsonFile = values['platform-keys'] ?? (values['platform-key'] === undefined ? process.env.MPS_PLATFORM_KEYS_FILE : undefined);
  if (jsonFile !== undefined && jsonFile !== '') {
    const text = await readNamedFile(jsonFile, 'platform keys file');
    try {
      Object.assign(keys, parsePlatformKeysJson(text));
    } catch (err) {
      // Like a key file that cannot be read: a wrong file on the command line (exit 2).
      throw new UsageError(`platform keys file ${JSON.stringify(jsonFile)}: ${(err as Error).message}`);
    }
    any = true;
  }
  const single = values['platform-key'] ?? [];
  const bare = single.filter((entry) => !entry.includes('='));
  if (bare.length > 1) throw new UsageError('only one --platform-key may omit KEYID=; give the others as KEYID=FILE');
  for (const entry of single) {
    const eq = entry.indexOf('=');
    const keyId = eq === -1 ? required(values['platform-key-id'], '--platform-key-id (for --platform-key FILE)') : entry.slice(0, eq);
    const file = eq === -1 ? entry : entry.slice(eq + 1);
    if (keyId === '' || file === '') throw new UsageError(`--platform-key ${entry}: expected KEYID=FILE`);
    keys[keyId] = await readNamedFile(file, 'platform key file');
    any = true;
  }
  if (!any) return undefined;
  // A file that holds no usable public key is a wrong argument (exit 2), for every command alike.
  asUsage(() => loadPublicKeys(keys));
  return keys;
}

/**
 * The request body exactly as given (--json text or --file bytes): checked to be a JSON object,
 * then sent and signed byte for byte, never re-serialized, so that the platform judges what was
 * typed (`1.0`, `1e2`, a duplicate key or an integer past 2^53 reach it as written).
 */
async function jsonBody(values: Values): Promise<Buffer> {
  if ((values.json === undefined) === (values.file === undefined))
    throw new UsageError('give the request body with exactly one of --json and --file');
  const bytes = values.json !== undefined ? Buffer.from(values.json, 'utf8') : await readBytes(values.file as string);
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (err) {
    throw new UsageError(`the request body is not JSON: ${(err as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new UsageError('the request body must be a JSON object');
  return bytes;
}

/** A value the SDK refuses (TypeError / RangeError from its checks) is a wrong command line: exit 2. */
function usageOf(err: unknown): unknown {
  if (err instanceof TypeError || err instanceof RangeError) return new UsageError(err.message);
  // OpenSSL refusing a key (e.g. a public key given as --private-key): a wrong file on the command line.
  const code = (err as NodeJS.ErrnoException)?.code;
  if (typeof code === 'string' && code.startsWith('ERR_OSSL')) {
    return new UsageError(`a key file cannot be used (${(err as Error).message}): --private-key must be your PEM private key`);
  }
  return err;
}

function asUsage<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw usageOf(err);
  }
}

function argument(positionals: string[], what: string): string {
  if (positionals.length !== 2) throw new UsageError(`expected exactly one ${what}`);
  return positionals[1] as string;
}

async function keygen(values: Values): Promise<number> {
  const dir = required(values['out-dir'], '--out-dir');
  const bits = integer(values.bits, '--bits') ?? DEFAULT_RSA_BITS;
  const pair = await generateRsaKeyPair({ bits }).catch((err: unknown) => {
    throw usageOf(err);
  });
  await mkdir(dir, { recursive: true });
  const flag = values.force ? 'w' : 'wx';
  const privateFile = join(dir, 'merchant-private.pem');
  const publicFile = join(dir, 'merchant-public.pem');
  for (const [file, content, mode] of [
    [privateFile, pair.privateKeyPem, 0o600],
    [publicFile, pair.publicKeyPem, 0o644],
  ] as const) {
    const handle = await open(file, flag, mode).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST') throw new UsageError(`${file} exists; pass --force to overwrite it`);
      throw err;
    });
    try {
      await handle.writeFile(content);
    } finally {
      await handle.close();
    }
    await chmod(file, mode); // the umask, or an existing file with --force, may have left other bits
  }
  process.stdout.write(`${JSON.stringify({ privateKeyFile: privateFile, publicKeyFile: publicFile, bits }, null, 2)}\n`);
  return 0;
}

async function verifyCommand(values: Values): Promise<number> {
  let headers: unknown;
  try {
    headers = JSON.parse(await readNamedFile(required(values.headers, '--headers'), 'headers file'));
  } catch (err) {
    throw err instanceof UsageError ? err : new UsageError(`--headers is not JSON: ${(err as Error).message}`);
  }
  if (typeof headers !== 'object' || headers === null || Array.isArray(headers)) throw new UsageError('--headers must hold a JSON object');
  const rawBody = await readNamedBytes(required(values.body, '--body'), 'body file');
  const keys = await platformKeys(values);
  if (keys === undefined) throw new UsageError('verify-notification needs --platform-keys or --platform-key');
  const payload = verifyNotification({
    headers: headers as Record<string, string>,
    rawBody,
    platformPublicKeys: keys,
    toleranceSeconds: integer(values['tolerance-seconds'], '--tolerance-seconds'),
  });
  process.stdout.write(`${JSON.stringify(payload, null, 2)}\n`);
  return 0;
}

/** The signed client of the API commands, from the options and their environment variables. */
async function clientOf(values: Values): Promise<{ client: PaymentClient; baseUrl: string; options: { requestId?: string } }> {
  const env = process.env;
  const keys = await platformKeys(values);
  const settings = {
    baseUrl: required(values['base-url'] ?? env.MPS_BASE_URL, '--base-url (or MPS_BASE_URL)'),
    appId: required(values['app-id'] ?? env.MPS_APP_ID, '--app-id (or MPS_APP_ID)'),
    keyId: required(values['key-id'] ?? env.MPS_KEY_ID, '--key-id (or MPS_KEY_ID)'),
    privateKeyPem: await readNamedFile(
      required(values['private-key'] ?? env.MPS_PRIVATE_KEY_FILE, '--private-key (or MPS_PRIVATE_KEY_FILE)'),
      'private key file',
    ),
    platformPublicKeys: keys,
    timeoutMs: integer(values['timeout-ms'], '--timeout-ms'),
    maxRetries: integer(values['max-retries'], '--max-retries'),
  };
  const client = asUsage(() => new PaymentClient(settings));
  if (values['request-id'] !== undefined) asUsage(() => assertRequestId(values['request-id'] as string));
  if (keys === undefined) process.stderr.write('warning: no platform public key given; response signatures are not verified\n');
  const options = values['request-id'] === undefined ? {} : { requestId: values['request-id'] };
  return { client, baseUrl: settings.baseUrl, options };
}

async function apiCommand(command: string, values: Values, positionals: string[]): Promise<number> {
  const { client, options } = await clientOf(values);
  const noArgument = (): void => {
    if (positionals.length !== 1) throw new UsageError(`${command} takes no argument`);
  };
  let result: { body: unknown };
  switch (command) {
    case 'create-order':
      noArgument();
      result = await client.request<CreateOrderResponse>('POST', '/api/open/v1/payments', await jsonBody(values), options);
      break;
    case 'recreate-attempt':
      result = await client.recreateAttempt(argument(positionals, 'OUT_TRADE_NO'), options);
      break;
    case 'query-order':
      result = await client.queryOrder(argument(positionals, 'OUT_TRADE_NO'), options);
      break;
    case 'close-order':
      result = await client.closeOrder(argument(positionals, 'OUT_TRADE_NO'), options);
      break;
    case 'create-refund':
      noArgument();
      result = await client.request<CreateRefundResponse>('POST', '/api/open/v1/refunds', await jsonBody(values), options);
      break;
    case 'query-refund':
      result = await client.queryRefund(argument(positionals, 'OUT_REFUND_NO'), options);
      break;
    case 'settlement':
      noArgument();
      result = await client.getSettlementAccounts(options);
      break;
    case 'statement':
      result = await statementCommand(client, argument(positionals, 'DAY'), values, options);
      break;
    case 'events':
      result = await eventsCommand(client, positionals, values, options);
      break;
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command)}`);
  }
  process.stdout.write(`${JSON.stringify(result.body, null, 2)}\n`);
  return 0;
}

/**
 * `statement DAY [--gzip] [--out FILE]`: the summary; with --out, the file written to FILE.partial
 * as it arrives, renamed to FILE once checked, removed otherwise.
 */
async function statementCommand(
  client: PaymentClient,
  day: string,
  values: Values,
  options: { requestId?: string },
): Promise<{ body: unknown }> {
  const compression = values.gzip ? 'gzip' : undefined;
  if (values.out === undefined) return client.getStatement(day, { compression }, options);
  const partial = `${values.out}.partial`;
  const out = createWriteStream(partial, { flags: 'w', mode: 0o600 });
  // A write that fails (a full disk) fails the command; a write still pending when the download
  // fails errors as the file is closed, which is expected.
  let writeError: Error | null = null;
  out.on('error', (err) => (writeError ??= err));
  try {
    const d = await client.downloadStatement(day, out, { compression, ...options });
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    if (writeError !== null) throw writeError;
    await rename(partial, values.out);
    return { body: { ...d.summary, file: values.out, sha256Checked: true, signatureVerified: d.signatureVerified } };
  } catch (err) {
    // Closed first: the file may still be being opened, and would come back after its removal.
    await new Promise<void>((resolve) => {
      out.once('close', () => resolve());
      out.destroy();
    });
    await rm(partial, { force: true });
    throw err;
  }
}

/** `events [filters] [--all]`, `events get EVENT_ID`, `events redeliver EVENT_ID`. */
async function eventsCommand(
  client: PaymentClient,
  positionals: string[],
  values: Values,
  options: { requestId?: string },
): Promise<{ body: unknown }> {
  const [, sub, id] = positionals;
  if (sub === 'get' || sub === 'redeliver') {
    if (id === undefined || positionals.length !== 3) throw new UsageError(`expected: events ${sub} EVENT_ID`);
    return sub === 'get' ? client.getEvent(id, options) : client.redeliverEvent(id, options);
  }
  if (sub !== undefined) throw new UsageError('expected: events [filters], events get EVENT_ID or events redeliver EVENT_ID');
  const filter: EventFilter = {
    ...(values.type !== undefined ? { type: values.type as EventFilter['type'] } : {}),
    ...(values.status !== undefined ? { status: values.status as EventFilter['status'] } : {}),
    ...(values.from !== undefined ? { from: values.from } : {}),
    ...(values.to !== undefined ? { to: values.to } : {}),
    ...(values.limit !== undefined ? { limit: integer(values.limit, '--limit') } : {}),
  };
  if (!values.all) return client.listEvents({ ...filter, ...(values.cursor !== undefined ? { cursor: values.cursor } : {}) }, options);
  if (values.cursor !== undefined) throw new UsageError('--all starts from the newest event: it takes no --cursor');
  const events = [];
  for await (const e of client.iterateEvents(filter)) events.push(e);
  return { body: { events } };
}

/**
 * `sandbox pay OUT_TRADE_NO`: the merchant knows its outTradeNo, the sandbox helper wants the
 * platform's openOrderId; the signed query (its answer verified like any other) gives one for the
 * other. The helper is a back-office route: the admin token, not a merchant signature.
 */
async function sandboxCommand(values: Values, positionals: string[]): Promise<number> {
  if (positionals[1] !== 'pay' || positionals.length !== 3) throw new UsageError('expected: sandbox pay OUT_TRADE_NO');
  const outTradeNo = positionals[2] as string;
  const token = required(values['admin-token'] ?? process.env.ADMIN_TOKEN, '--admin-token (or ADMIN_TOKEN)');
  const { client, baseUrl, options } = await clientOf(values);
  const order = await client.queryOrder(outTradeNo, options);
  const url = `${baseUrl.replace(/\/+$/, '')}/api/sandbox/v1/payments/${encodeURIComponent(order.body.openOrderId)}/pay`;
  const timeoutMs = integer(values['timeout-ms'], '--timeout-ms') ?? 15_000;
  const res = await createFetchTransport()({
    method: 'POST',
    url,
    headers: { authorization: `Bearer ${token}` },
    body: undefined,
    signal: AbortSignal.timeout(timeoutMs),
    timeoutMs,
  });
  const text = res.body.toString('utf8');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON: reported as text below
  }
  if (res.status >= 200 && res.status < 300) {
    process.stdout.write(`${JSON.stringify(body, null, 2)}\n`);
    return 0;
  }
  // The back office's failure envelope {code, message} as it came; anything else (such as the
  // 404 of a service without the sandbox provider, where the helper route does not exist) described.
  const envelope = typeof body === 'object' && body !== null && 'code' in body;
  const out = envelope
    ? body
    : {
        error: 'UnexpectedResponseError',
        status: res.status,
        message:
          res.status === 404 ? 'no sandbox helpers at this address: the service does not run the sandbox provider' : `HTTP ${res.status}`,
        bodyText: text.slice(0, 2000),
      };
  process.stderr.write(`${JSON.stringify(out, null, 2)}\n`);
  return 1;
}

/** Where `listen` receives when neither --url nor MPS_NOTIFY_URL says. */
const DEFAULT_NOTIFY_URL = 'http://127.0.0.1:9000/hook';
/** A notification's body is a few hundred bytes; anything past this is refused unread. */
const MAX_NOTIFICATION_BYTES = 1024 * 1024;

/**
 * `listen`: a notification receiver on this machine, for the sandbox and for trying an integration
 * out. Each POST to the URL's path is verified (verifyNotification: the raw body, the platform keys,
 * the time window) before anything is printed: verified, one line on stdout and 204; refused, a
 * line on stderr and 400, so the platform tries again later. Delivery is at least once: an eventId
 * already printed is acknowledged again, not printed twice.
 */
async function listenCommand(values: Values): Promise<number> {
  const keys = await platformKeys(values);
  if (keys === undefined) throw new UsageError('listen needs the platform keys: --platform-keys FILE (or MPS_PLATFORM_KEYS_FILE)');
  const given = values.url ?? process.env.MPS_NOTIFY_URL ?? DEFAULT_NOTIFY_URL;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw new UsageError(`--url ${JSON.stringify(given)} is not a URL`);
  }
  if (url.protocol !== 'http:') throw new UsageError(`listen serves plain http (got ${url.protocol}); put TLS in front of it for https`);
  const toleranceSeconds = integer(values['tolerance-seconds'], '--tolerance-seconds');
  const count = integer(values.count, '--count');
  if (count === 0) throw new UsageError('--count must be at least 1');
  const port = url.port === '' ? 80 : Number(url.port);
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  // With the app's settings at hand (merchant.env), a client verifies: like the API commands, it
  // learns a platform key it does not know yet (a rotation) from the platform's signed key list.
  const client = await clientOf(values).then(
    (c) => c.client,
    () => null,
  );
  const seen = new Set<string>();
  let verified = 0;
  const stop = () => {
    server.close();
    server.closeIdleConnections();
  };

  const server = createServer((req, res) => {
    if (req.method !== 'POST' || (req.url ?? '').split('?')[0] !== url.pathname) {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_NOTIFICATION_BYTES) req.destroy();
      else chunks.push(c);
    });
    req.on('end', async () => {
      try {
        const input = { headers: req.headers, rawBody: Buffer.concat(chunks), toleranceSeconds };
        const event = client ? await client.verifyNotification(input) : verifyNotification({ ...input, platformPublicKeys: keys });
        if (!seen.has(event.eventId)) {
          seen.add(event.eventId);
          verified++;
          const refund = event.outRefundNo === null ? '' : ` ${event.outRefundNo}`;
          process.stdout.write(
            `verified ${event.eventType} ${event.outTradeNo}${refund} stateVersion=${event.stateVersion} ${JSON.stringify(event)}\n`,
          );
        }
        // The platform keeps its connection open for the next event: once the last answer is out, close it too.
        if (count !== undefined && verified >= count) res.once('finish', stop);
        res.writeHead(204).end();
      } catch (err) {
        const reason = err instanceof NotificationVerificationError ? err.reason : 'ERROR';
        process.stderr.write(`rejected a notification (${reason}): ${(err as Error).message}\n`);
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' || err.code === 'EACCES' ? new UsageError(`cannot listen on ${url.host}: ${err.code}`) : err),
    );
    server.listen(port, host, () => resolve());
  });
  process.stderr.write(
    `listening for notifications on ${url.href}${count === undefined ? ' (Ctrl-C to stop)' : ` until ${count} arrived`}\n`,
  );
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await new Promise<void>((resolve) => server.once('close', () => resolve()));
  return 0;
}

function report(err: unknown): number {
  const code = (err as { code?: unknown } | null)?.code;
  if (err instanceof UsageError || (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_'))) {
    process.stderr.write(`mps-merchant: ${(err as Error).message}\n\nRun mps-merchant --help for usage.\n`);
    return 2;
  }
  let out: unknown;
  if (err instanceof PaymentApiError) {
    out = err.body;
  } else if (err instanceof NotificationVerificationError) {
    out = { error: err.name, reason: err.reason, message: err.message };
  } else if (err instanceof MpsError) {
    out = { error: err.name, message: err.message, ...('requestId' in err ? { requestId: err.requestId } : {}) };
  } else {
    out = { error: (err as Error)?.name ?? 'Error', message: (err as Error)?.message ?? String(err) };
  }
  process.stderr.write(`${JSON.stringify(out, null, 2)}\n`);
  return 1;
}

async function main(argv: string[]): Promise<number> {
  try {
    const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
    const command = positionals[0];
    if (values.help || command === undefined || command === 'help') {
      (values.help || command === 'help' ? process.stdout : process.stderr).write(USAGE);
      return values.help || command === 'help' ? 0 : 2;
    }
    if (command === 'keygen') {
      if (positionals.length !== 1) throw new UsageError('keygen takes no argument');
      return await keygen(values);
    }
    if (command === 'verify-notification') {
      if (positionals.length !== 1) throw new UsageError('verify-notification takes no argument');
      return await verifyCommand(values);
    }
    if (command === 'sandbox') return await sandboxCommand(values, positionals);
    if (command === 'listen') {
      if (positionals.length !== 1) throw new UsageError('listen takes no argument');
      return await listenCommand(values);
    }
    if (!API_COMMANDS.has(command)) throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    return await apiCommand(command, values, positionals);
  } catch (err) {
    return report(err);
  }
}

process.exitCode = await main(process.argv.slice(2));
