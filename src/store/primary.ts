/**
 * Following the primary of a highly available PostgreSQL (docs/high-availability.md).
 *
 * DATABASE_URL may name several nodes, as libpq takes them:
 * `postgres://user@node1:5432,node2:5432/db?target_session_attrs=read-write`. node-postgres
 * connects to one host, so the pool is given a client class that, before each new connection,
 * asks which node is the primary: the one it last found while it still answers, otherwise the
 * nodes are tried in order and the first that is neither in recovery nor read-only
 * (`pg_is_in_recovery()`, `transaction_read_only`: what libpq's `read-write` checks) is taken. A
 * connection that fails, finds a standby or later breaks makes the node found stale, so the next
 * connection looks again: after a failover the service reaches the new primary within the
 * manager's promotion time, with no restart. While no node is a primary, a connection fails at
 * once (each node is given PROBE_TIMEOUT_MS), and the request that needed it is answered 503.
 */
import pg from 'pg';

/** One node of the address. */
export interface Node {
  host: string;
  port: number;
}

/** How long one node is given to answer when looking for the primary. */
export const PROBE_TIMEOUT_MS = 1500;

const SHAPE = /^(postgres(?:ql)?:\/\/(?:[^@/?#]*@)?)([^/?#]*)(.*)$/i;

/**
 * The nodes of a connection string naming several (`host:port,host:port`), with the string to
 * reach each one; null for an address of one node (or a socket directory), which the pool takes
 * as it is. target_session_attrs is this module's to apply: only `read-write` (or none) is accepted.
 */
export function parseNodes(connectionString: string): { nodes: Node[]; urlOf: (n: Node) => string } | null {
  const m = SHAPE.exec(connectionString);
  if (!m || !m[2]!.includes(',')) return null;
  const [, head, list, tail] = m as unknown as [string, string, string, string];
  const nodes = list.split(',').map((item): Node => {
    const hp = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(item);
    if (!hp) throw new Error(`DATABASE_URL: '${item}' is not a host or host:port`);
    const port = hp[2] === undefined ? 5432 : Number(hp[2]);
    if (port < 1 || port > 65535) throw new Error(`DATABASE_URL: port ${port} is out of range`);
    return { host: hp[1]!.replace(/^\[|\]$/g, ''), port };
  });
  const q = tail.indexOf('?');
  const path = q < 0 ? tail : tail.slice(0, q);
  const params = new URLSearchParams(q < 0 ? '' : tail.slice(q + 1));
  const attrs = params.get('target_session_attrs');
  if (attrs !== null && attrs !== 'read-write' && attrs !== 'primary') {
    throw new Error(`DATABASE_URL: target_session_attrs=${attrs} is not supported (the service writes: read-write)`);
  }
  params.delete('target_session_attrs');
  if (params.has('host') || params.has('hostaddr') || params.has('port')) {
    throw new Error('DATABASE_URL: with several nodes, hosts and ports go in the address (host1:port,host2:port), not in the query');
  }
  const query = params.toString();
  const urlOf = (n: Node) => `${head}${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}${path}${query === '' ? '' : `?${query}`}`;
  return { nodes, urlOf };
}

/** The primary among the nodes, found again whenever the one known stops serving. */
export class PrimaryFinder {
  readonly nodes: Node[];
  readonly urlOf: (n: Node) => string;
  #known: Node | null = null;
  #finding: Promise<Node> | null = null;
  /** How many times a primary was found (the first connection's included). */
  found = 0;

  constructor(nodes: Node[], urlOf: (n: Node) => string) {
    this.nodes = nodes;
    this.urlOf = urlOf;
  }

  /** The primary known, or the first node in order that is one now; rejects when none is. */
  primary(): Promise<Node> {
    if (this.#known !== null) return Promise.resolve(this.#known);
    this.#finding ??= this.#find().finally(() => (this.#finding = null));
    return this.#finding;
  }

  /** The node stopped serving (a failed or broken connection, a standby): look again next time. */
  lost(node: Node): void {
    if (this.#known === node) this.#known = null;
  }

  async #find(): Promise<Node> {
    const seen: string[] = [];
    for (const node of this.nodes) {
      const client = new pg.Client({ connectionString: this.urlOf(node), connectionTimeoutMillis: PROBE_TIMEOUT_MS });
      client.on('error', () => {});
      try {
        await client.connect();
        if (!(await isReadOnly(client))) {
          this.#known = node;
          this.found++;
          return node;
        }
        seen.push(`${node.host}:${node.port} is a standby`);
      } catch (err) {
        seen.push(`${node.host}:${node.port}: ${(err as Error).message}`);
      } finally {
        await client.end().catch(() => {});
      }
    }
    throw new Error(`no primary among the nodes of DATABASE_URL (${seen.join('; ')})`);
  }
}

async function isReadOnly(client: pg.Client): Promise<boolean> {
  const r = await client.query<{ ro: boolean }>(`SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' AS ro`);
  return r.rows[0]!.ro;
}

/**
 * The client class of a pool that follows the primary: each connection goes to the node the
 * finder names, is checked to be writable, and reports its node lost when it fails or breaks.
 */
export function followingClient(finder: PrimaryFinder): typeof pg.Client {
  return class FollowingClient extends pg.Client {
    override connect(): Promise<pg.Client>;
    override connect(callback: (err: Error) => void): void;
    override connect(callback?: (err: Error) => void): Promise<pg.Client> | void {
      const done = this.#connect();
      if (callback === undefined) return done.then(() => this);
      done.then(
        () => callback(undefined as unknown as Error),
        (err: Error) => callback(err),
      );
    }

    async #connect(): Promise<void> {
      const node = await finder.primary();
      // Client reads its host and port when it opens the socket (pg 8: `_connect`).
      const self = this as unknown as { host: string; port: number; connectionParameters: { host: string; port: number } };
      self.host = self.connectionParameters.host = node.host;
      self.port = self.connectionParameters.port = node.port;
      try {
        await super.connect();
        if (await isReadOnly(this)) throw new Error(`${node.host}:${node.port} is no longer the primary`);
      } catch (err) {
        finder.lost(node);
        await this.end().catch(() => {});
        throw err;
      }
      this.on('error', () => finder.lost(node));
      // An end the client did not ask for (the server went away); the pool's own ends are asked for.
      this.on('end', () => {
        if ((this as unknown as { _ending?: boolean })._ending !== true) finder.lost(node);
      });
    }
  };
}
