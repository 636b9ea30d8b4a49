/**
 * The service's logger (pino, Fastify's). Two formats, chosen by LOG_FORMAT:
 *  - `json`: one JSON object per line on standard output, for log collectors (the default when
 *    standard output is not a terminal);
 *  - `pretty`: one readable line per event, by pino-pretty, in this process and synchronously
 *    (the default on a terminal): `12:00:01.234 INFO: request completed 201 POST in 12.3 ms {...}`.
 * The fields a line carries are the same in both; pretty only lays them out for a person.
 */
import { styleText } from 'node:util';
import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** LOG_FORMAT when set; otherwise pretty on a terminal, JSON elsewhere. */
export function effectiveLogFormat(configured: LogFormat | null, isTty = process.stdout.isTTY === true): LogFormat {
  return configured ?? (isTty ? 'pretty' : 'json');
}

/** The line's message, with what a person looks for in a request's lines: method and path, or status and time. */
function messageFormat(log: Record<string, unknown>, messageKey: string): string {
  const msg = String(log[messageKey] ?? '');
  const req = log.req as { method?: string; url?: string } | undefined;
  if (req?.method) return `${msg} ${req.method} ${req.url ?? ''}`;
  const res = log.res as { statusCode?: number } | undefined;
  if (res?.statusCode !== undefined) {
    const took = typeof log.responseTime === 'number' ? ` in ${log.responseTime.toFixed(1)} ms` : '';
    return `${msg} ${res.statusCode}${took}`;
  }
  return msg;
}

/** pino-pretty as a synchronous stream to standard output: one line per event. */
export function prettyStream(destination: number | NodeJS.WritableStream = 1): NodeJS.WritableStream {
  return pretty({
    destination,
    sync: true,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,req,res,responseTime',
    messageFormat,
  }) as unknown as NodeJS.WritableStream;
}

/**
 * A URL as logged: a cashier token (the only key to its payment page, docs/cashier.md) replaced by
 * `[token]`. The cashier's own routes log no access line at the default level; a path under
 * /cashier/ that matches none of them (a 404) is logged like any other, without its token.
 */
export function loggedUrl(url: string): string {
  return url.replace(/(\/cashier\/)[^/?#]+/, '$1[token]');
}

/** The logger's options: LOG_LEVEL, and the request's URL as loggedUrl writes it. */
export function loggerOptions(level: string): pino.LoggerOptions {
  return {
    level,
    redact: { paths: ['req.url'], censor: (value: unknown) => (typeof value === 'string' ? loggedUrl(value) : value) },
  };
}

/** The service's logger at LOG_LEVEL in the format given. */
export function createLogger(level: string, format: LogFormat): Logger {
  return format === 'pretty' ? pino(loggerOptions(level), prettyStream()) : pino(loggerOptions(level));
}

/**
 * What the CLIs of another terminal need, printed once before listening (the port is known by
 * then, PORT=0 included): the line to export for them, with the admin token when it was generated
 * for this run (it is printed nowhere else). It stands out on a terminal.
 */
export function cliBanner(config: { host: string; port: number }, generatedToken: string | null): string {
  // A wildcard address listens on loopback too; the CLIs run on this machine.
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host === '::' ? '::1' : config.host;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${config.port}`;
  const line = `export MPS_ADMIN_URL=${url}${generatedToken === null ? '' : ` ADMIN_TOKEN=${generatedToken}`}`;
  const note =
    generatedToken === null
      ? 'Export the ADMIN_TOKEN you set there too.'
      : 'ADMIN_TOKEN was generated for this run (set ADMIN_TOKEN to choose a fixed one).';
  return `\nTo use the operator CLI (npm run ops) and \`mps-merchant sandbox pay\` from another terminal:\n\n    ${styleText(['bold', 'yellow'], line)}\n\n${note}\n\n`;
}
