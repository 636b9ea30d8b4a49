#!/usr/bin/env node
/**
 * Operator CLI: provisioning through the back-office API of a running service (the same code
 * paths as the admin API), so a newcomer can set up a merchant without writing HTTP by hand.
 *   npm run ops -- help
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { generateRsaKeyPair } from '@mps/sdk';

const USAGE = `usage: npm run ops -- <command> [options]

Connection (or env MPS_ADMIN_URL, ADMIN_TOKEN):
  --url http://127.0.0.1:8080   --token <the ADMIN_TOKEN, or an operator's API token (mpsop_...)>

Commands:
  provision --name NAME [--entity-type CORPORATE|INDIVIDUAL] [--notify-url URL] --out-dir DIR [--force]
        merchant + app + a fresh RSA-2048 key pair (registered) + a settlement account and a
        SINGLE allocation; writes merchant-private.pem, merchant-public.pem, platform-keys.json
        and merchant.env (for the merchant CLI: MPS_BASE_URL, MPS_APP_ID, ..., MPS_NOTIFY_URL) into DIR;
        refuses a DIR that already holds them (another app's key) unless --force
  merchant create --name NAME --entity-type CORPORATE|INDIVIDUAL
  merchant get MERCHANT_ID
  merchant list
  app create --merchant MERCHANT_ID [--json '{"notifyUrl": ..., "channels": [...], ...}']
  app get APP_ID
  app update APP_ID --json '{"rateLimitPerSecond": 50, "statementDownloadsAtOnce": 4, ...}'
  key add --app APP_ID --key-id KEY_ID --public-key FILE.pem
  key list APP_ID
  account add --merchant MERCHANT_ID --entity-type T --entity-name N --merchant-no NO --card-number DIGITS [--agreed-ceiling-fen N]
  allocation set --merchant MERCHANT_ID --json '{"mode": "RATIO", "participants": [...], "ratios": [...], "unavailablePolicy": "FAIL"}'
  fee-rule set --merchant MERCHANT_ID --json '{"ruleVersion": 1, "standardRateBps": 60, "largeRateBps": 38, "thresholdFen": 10000000, "merchantRateBps": 60}'
  platform-key                 print the current platform public key (PEM)
  platform-keys                print all published platform keys as JSON
  platform-keys rotate [--json '{"activateAfterSeconds": 86400}']
                               stage a new platform signing key (published now, signing from activatesAt)
  order get OPEN_ORDER_ID      back-office view of an order (attempts, refunds, events)
  events [--status DEAD] [--app APP_ID] [--limit N]
                               list events;  event get EVENT_ID;  event redeliver EVENT_ID
  operator create --name NAME --role admin|operations|finance|support [--password-stdin]
                               a named operator of the console (docs/console.md); without
                               --password-stdin a strong password is generated and printed once
  operator list
  operator reset-password --name NAME [--password-stdin]
                               a new password (generated unless given); the operator's sessions end
  operator disable --name NAME its sessions and API tokens stop working
  audit [--operator NAME] [--action A] [--entity-id ID] [--limit N]
                               the audit log, newest first
  reconcile --day YYYY-MM-DD [--provider sandbox|alipay|wechatpay] [--wait]
                               reconcile the day (Asia/Shanghai) with each provider's statement, or one's;
                               --wait: until the runs finish, then print them (exit 1 if one failed)
  reconciliation runs [--day YYYY-MM-DD] [--provider P] [--limit N]
  reconciliation run RUN_ID    a run with its lines counted by outcome
  reconciliation lines RUN_ID [--outcome AMOUNT_MISMATCH] [--limit N]
  discrepancies [--status OPEN|RESOLVED] [--source STATEMENT] [--provider P] [--limit N]
                               what providers said that does not match the ledger (reconciliation findings: STATEMENT)
  discrepancy resolve ID       the operator has dealt with it
  request METHOD PATH [--json BODY]   any admin API call (PATH after /api/admin/v1, or a full /api/... path)

Exit status: 0 done; 1 the service refused or could not be reached, or a file could not be read
or written; 2 a command line this CLI does not understand (unknown option or command, an option
the command does not take, missing or malformed argument).
`;

/** The service refused, could not be reached, or a file could not be used (exit 1). */
class CliError extends Error {}
/** A command line this CLI does not understand (exit 2). */
class UsageError extends Error {}

function fail(err: unknown): void {
  const e = (err instanceof Error ? err : new Error(String(err))) as NodeJS.ErrnoException;
  const known = err instanceof UsageError || err instanceof CliError || typeof e.code === 'string';
  process.stderr.write(`error: ${known ? e.message : (e.stack ?? String(err))}\n`);
  if (err instanceof UsageError) process.stderr.write('(try: npm run ops -- help)\n');
  process.exitCode = err instanceof UsageError ? 2 : 1;
}

// A reader that stops early (`| head -1`) is not an error.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw err;
});

function parseCommandLine() {
  try {
    return parseArgs({
      allowPositionals: true,
      options: {
        url: { type: 'string' },
        token: { type: 'string' },
        name: { type: 'string' },
        'entity-type': { type: 'string' },
        'entity-name': { type: 'string' },
        'merchant-no': { type: 'string' },
        'card-number': { type: 'string' },
        'agreed-ceiling-fen': { type: 'string' },
        'notify-url': { type: 'string' },
        'out-dir': { type: 'string' },
        merchant: { type: 'string' },
        app: { type: 'string' },
        'key-id': { type: 'string' },
        'public-key': { type: 'string' },
        json: { type: 'string' },
        status: { type: 'string' },
        limit: { type: 'string' },
        day: { type: 'string' },
        provider: { type: 'string' },
        source: { type: 'string' },
        outcome: { type: 'string' },
        wait: { type: 'boolean' },
        force: { type: 'boolean' },
        role: { type: 'string' },
        'password-stdin': { type: 'boolean' },
        operator: { type: 'string' },
        action: { type: 'string' },
        'entity-id': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    fail(new UsageError((err as Error).message));
    process.exit(2);
  }
}
const { values: opt, positionals } = parseCommandLine();

const base = (opt.url ?? process.env.MPS_ADMIN_URL ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
const token = opt.token ?? process.env.ADMIN_TOKEN;

async function api(method: string, p: string, body?: unknown): Promise<Record<string, unknown>> {
  if (!token) throw new CliError('an admin token is required: --token or ADMIN_TOKEN');
  let res: Response;
  try {
    // A full path (`/api/admin/v1/...`, `/api/sandbox/v1/...`) is taken as given: docs quote them so.
    res = await fetch(`${base}${p.startsWith('/api/') ? p : `/api/admin/v1${p}`}`, {
      method,
      // The user agent tells the audit log a change came through this CLI (channel `cli`).
      headers: {
        authorization: `Bearer ${token}`,
        'user-agent': 'mps-ops/1',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new CliError(`cannot reach ${base} (--url or MPS_ADMIN_URL: npm start prints the line to export): ${(err as Error).message}`);
  }
  const text = await res.text();
  const json = text ? (JSON.parse(text) as Record<string, unknown>) : {};
  if (!res.ok) throw new CliError(`${method} ${p} -> ${res.status} ${json.code ?? ''}: ${json.message ?? text}`);
  return json;
}

function need(name: string, v: string | undefined): string {
  if (v === undefined || v === '') throw new UsageError(`--${name} is required`);
  return v;
}

/** A positional argument, named as the usage names it (`merchant get MERCHANT_ID`). */
function needArg(name: string, v: string | undefined): string {
  if (v === undefined || v === '') throw new UsageError(`${name} is required (see help)`);
  return v;
}

function json(): Record<string, unknown> {
  if (opt.json === undefined) return {};
  try {
    return JSON.parse(opt.json) as Record<string, unknown>;
  } catch {
    throw new UsageError('--json must be a JSON object');
  }
}

function int(name: string, v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v)) throw new UsageError(`--${name} must be an integer`);
  return Number(v);
}

/** The password of `operator create` and `reset-password`: read from standard input, or generated (printed once). */
async function passwordOf(): Promise<{ password: string; generated: boolean }> {
  if (!opt['password-stdin']) return { password: randomBytes(18).toString('base64url'), generated: true };
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  const password = Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
  if (password === '') throw new UsageError('--password-stdin: standard input held no password');
  return { password, generated: false };
}

async function operatorByName(name: string): Promise<Record<string, unknown>> {
  const list = (await api('GET', '/operators')).operators as Record<string, unknown>[];
  const o = list.find((x) => x.name === name);
  if (!o) throw new CliError(`no operator named ${name}`);
  return o;
}

async function operatorCommand(sub: string): Promise<unknown> {
  if (sub === 'list') return api('GET', '/operators');
  const name = need('name', opt.name);
  if (sub === 'create') {
    const { password, generated } = await passwordOf();
    const o = await api('POST', '/operators', { name, role: need('role', opt.role), password });
    return { ...o, ...(generated ? { password, note: 'shown once: sign in at /console with it, then change it under "My account"' } : {}) };
  }
  const o = await operatorByName(name);
  if (sub === 'reset-password') {
    const { password, generated } = await passwordOf();
    const r = await api('PATCH', `/operators/${o.operatorId}`, { password });
    return { ...r, ...(generated ? { password, note: "shown once; the operator's sessions have ended" } : {}) };
  }
  return api('PATCH', `/operators/${o.operatorId}`, { status: 'DISABLED' });
}

const PROVISION_FILES = ['merchant-private.pem', 'merchant-public.pem', 'platform-keys.json', 'merchant.env'];

async function provision(): Promise<unknown> {
  const outDir = path.resolve(need('out-dir', opt['out-dir']));
  if (!opt.force) {
    // Checked before anything is created: a second provision into the same folder would replace
    // the first app's private key, which exists nowhere else.
    const taken: string[] = [];
    for (const f of PROVISION_FILES) {
      if (
        await fs.access(path.join(outDir, f)).then(
          () => true,
          () => false,
        )
      )
        taken.push(f);
    }
    if (taken.length > 0) {
      throw new CliError(
        `${outDir} already holds ${taken.join(', ')} (another app's key); choose another --out-dir, or pass --force to replace them`,
      );
    }
  }
  const entityType = opt['entity-type'] ?? 'CORPORATE';
  const m = await api('POST', '/merchants', { name: need('name', opt.name), entityType });
  const merchantId = m.merchantId as string;
  const a = await api('POST', `/merchants/${merchantId}/apps`, opt['notify-url'] ? { notifyUrl: opt['notify-url'] } : {});
  const appId = a.appId as string;
  const keys = await generateRsaKeyPair();
  const keyId = 'key-1';
  await api('POST', `/apps/${appId}/keys`, { keyId, publicKeyPem: keys.publicKeyPem });
  const acc = await api('POST', `/merchants/${merchantId}/settlement-accounts`, {
    entityType,
    entityName: opt.name,
    merchantNo: `M${Date.now()}`,
    cardNumber: '6222000000000000',
  });
  await api('PUT', `/merchants/${merchantId}/allocation`, { mode: 'SINGLE', participants: [acc.accountId], unavailablePolicy: 'FAIL' });
  const platform = await api('GET', '/platform-keys');
  await fs.mkdir(outDir, { recursive: true });
  await fs.writeFile(path.join(outDir, 'merchant-private.pem'), keys.privateKeyPem, { mode: 0o600 });
  await fs.writeFile(path.join(outDir, 'merchant-public.pem'), keys.publicKeyPem);
  await fs.writeFile(path.join(outDir, 'platform-keys.json'), `${JSON.stringify({ keys: platform.keys }, null, 2)}\n`);
  const env = [
    `MPS_BASE_URL=${base}`,
    `MPS_APP_ID=${appId}`,
    `MPS_KEY_ID=${keyId}`,
    `MPS_PRIVATE_KEY_FILE=${path.join(outDir, 'merchant-private.pem')}`,
    `MPS_PLATFORM_KEYS_FILE=${path.join(outDir, 'platform-keys.json')}`,
    // Where `mps-merchant listen` receives the app's notifications.
    ...(opt['notify-url'] ? [`MPS_NOTIFY_URL=${opt['notify-url']}`] : []),
  ];
  await fs.writeFile(path.join(outDir, 'merchant.env'), `${env.join('\n')}\n`);
  return { merchantId, appId, keyId, accountId: acc.accountId, outDir };
}

/** `?a=1&b=2` of the options given, or ''. */
function query(values: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v !== undefined) q.set(k, v);
  return q.size > 0 ? `?${q}` : '';
}

/** Asks for the runs; with --wait, follows them until each has finished (exit 1 when one failed). */
async function reconcile(): Promise<unknown> {
  const day = need('day', opt.day);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) throw new UsageError('--day must be YYYY-MM-DD');
  const asked = await api('POST', '/reconciliation/runs', { day, ...(opt.provider !== undefined ? { provider: opt.provider } : {}) });
  if (!opt.wait) return asked;
  const runs = [];
  for (const r of asked.runs as { runId: string }[]) {
    for (;;) {
      const run = await api('GET', `/reconciliation/runs/${r.runId}`);
      if (run.status === 'COMPLETED' || run.status === 'FAILED') {
        runs.push(run);
        break;
      }
      await new Promise((res) => setTimeout(res, 1000));
    }
  }
  if (runs.some((r) => r.status === 'FAILED')) process.exitCode = 1;
  return { runs };
}

/**
 * The options each command takes (beside --url, --token and --help): one it does not take is refused
 * (exit 2) rather than ignored, so that a mistyped command line changes nothing it did not say.
 */
const OPTIONS_OF: Record<string, string[]> = {
  provision: ['name', 'entity-type', 'notify-url', 'out-dir', 'force'],
  'merchant create': ['name', 'entity-type'],
  'app create': ['merchant', 'json'],
  'app update': ['json'],
  'key add': ['app', 'key-id', 'public-key'],
  'account add': ['merchant', 'entity-type', 'entity-name', 'merchant-no', 'card-number', 'agreed-ceiling-fen'],
  'allocation set': ['merchant', 'json'],
  'fee-rule set': ['merchant', 'json'],
  'platform-keys rotate': ['json'],
  events: ['status', 'app', 'limit'],
  'operator create': ['name', 'role', 'password-stdin'],
  'operator reset-password': ['name', 'password-stdin'],
  'operator disable': ['name'],
  audit: ['operator', 'action', 'entity-id', 'limit'],
  reconcile: ['day', 'provider', 'wait'],
  'reconciliation runs': ['day', 'provider', 'limit'],
  'reconciliation lines': ['outcome', 'limit'],
  discrepancies: ['status', 'source', 'provider', 'limit'],
  'request POST': ['json'],
  'request PUT': ['json'],
  'request PATCH': ['json'],
  'request DELETE': ['json'],
  ...Object.fromEntries(
    [
      'merchant get',
      'merchant list',
      'app get',
      'key list',
      'platform-key',
      'platform-keys',
      'order get',
      'event get',
      'event redeliver',
      'operator list',
      'reconciliation run',
      'discrepancy resolve',
      'request GET',
    ].map((c) => [c, []]),
  ),
};

async function run(): Promise<unknown> {
  const [cmd, sub, arg] = positionals;
  if (opt.help || cmd === undefined || cmd === 'help') {
    process.stdout.write(USAGE);
    return undefined;
  }
  const command = `${cmd} ${sub ?? ''}`.trim();
  const takes = OPTIONS_OF[command];
  for (const o of takes === undefined ? [] : Object.keys(opt)) {
    if (o !== 'url' && o !== 'token' && !takes!.includes(o)) throw new UsageError(`'${command}' takes no --${o}`);
  }
  switch (command) {
    case 'provision':
      return provision();
    case 'merchant create':
      return api('POST', '/merchants', { name: need('name', opt.name), entityType: need('entity-type', opt['entity-type']) });
    case 'merchant get':
      return api('GET', `/merchants/${needArg('MERCHANT_ID', arg)}`);
    case 'merchant list':
      return api('GET', '/merchants');
    case 'app create':
      return api('POST', `/merchants/${need('merchant', opt.merchant)}/apps`, json());
    case 'app get':
      return api('GET', `/apps/${needArg('APP_ID', arg)}`);
    case 'app update':
      return api('PATCH', `/apps/${needArg('APP_ID', arg)}`, json());
    case 'key add':
      return api('POST', `/apps/${need('app', opt.app)}/keys`, {
        keyId: need('key-id', opt['key-id']),
        publicKeyPem: await fs.readFile(need('public-key', opt['public-key']), 'utf8'),
      });
    case 'key list':
      return api('GET', `/apps/${needArg('APP_ID', arg)}/keys`);
    case 'account add':
      return api('POST', `/merchants/${need('merchant', opt.merchant)}/settlement-accounts`, {
        entityType: need('entity-type', opt['entity-type']),
        entityName: need('entity-name', opt['entity-name']),
        merchantNo: need('merchant-no', opt['merchant-no']),
        cardNumber: need('card-number', opt['card-number']),
        ...(opt['agreed-ceiling-fen'] !== undefined ? { agreedCeilingFen: int('agreed-ceiling-fen', opt['agreed-ceiling-fen']) } : {}),
      });
    case 'allocation set':
      return api('PUT', `/merchants/${need('merchant', opt.merchant)}/allocation`, json());
    case 'fee-rule set':
      return api('PUT', `/merchants/${need('merchant', opt.merchant)}/fee-rule`, json());
    case 'platform-key': {
      const k = await api('GET', '/platform-keys');
      const cur = (k.keys as { keyId: string; publicKeyPem: string }[]).find((x) => x.keyId === k.currentKeyId);
      process.stdout.write(`# keyId ${cur?.keyId}\n${cur?.publicKeyPem ?? ''}`);
      return undefined;
    }
    case 'platform-keys':
      return api('GET', '/platform-keys');
    case 'platform-keys rotate':
      return api('POST', '/platform-keys/rotate', opt.json === undefined ? undefined : json());
    case 'order get':
      return api('GET', `/orders/${needArg('OPEN_ORDER_ID', arg)}`);
    case 'events':
      return api('GET', `/events${query({ status: opt.status || undefined, appId: opt.app || undefined, limit: opt.limit || undefined })}`);
    case 'event get':
      return api('GET', `/events/${needArg('EVENT_ID', arg)}`);
    case 'event redeliver':
      return api('POST', `/events/${needArg('EVENT_ID', arg)}/redeliver`);
    case 'operator create':
    case 'operator list':
    case 'operator reset-password':
    case 'operator disable':
      return operatorCommand(sub!);
    case 'audit': {
      const q = query({
        operator: opt.operator || undefined,
        action: opt.action || undefined,
        entityId: opt['entity-id'] || undefined,
        limit: opt.limit || undefined,
      });
      return api('GET', `/audit${q}`);
    }
    case 'reconcile':
      return reconcile();
    case 'reconciliation runs':
      return api('GET', `/reconciliation/runs${query({ day: opt.day, provider: opt.provider, limit: opt.limit })}`);
    case 'reconciliation run':
      return api('GET', `/reconciliation/runs/${needArg('RUN_ID', arg)}`);
    case 'reconciliation lines':
      return api('GET', `/reconciliation/runs/${needArg('RUN_ID', arg)}/lines${query({ outcome: opt.outcome, limit: opt.limit })}`);
    case 'discrepancies':
      return api(
        'GET',
        `/provider-discrepancies${query({ status: opt.status, source: opt.source, provider: opt.provider, limit: opt.limit })}`,
      );
    case 'discrepancy resolve':
      return api('POST', `/provider-discrepancies/${needArg('ID', arg)}/resolve`);
    case 'request GET':
    case 'request POST':
    case 'request PUT':
    case 'request PATCH':
    case 'request DELETE':
      return api(sub!, need('path', arg), opt.json === undefined ? undefined : json());
    default:
      throw new UsageError(`unknown command '${positionals.join(' ')}'`);
  }
}

run().then(
  (out) => {
    if (out !== undefined) process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
  },
  (err) => fail(err),
);
