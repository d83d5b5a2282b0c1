import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { ConfigError, processConfig, wholeNumberDefault, type Config } from '../config.js';
import { startEmbeddedPostgres } from './embedded.js';
import { migrateLatest, migrationSource, pendingMigrations, SchemaBehindError } from './migrate.js';
import { currentDatabaseName, setRoleStatement, type ServiceRole } from './roles.js';

// node-postgres returns bigint and numeric as strings; money is bigint fils and must reach JSON as a number.
// Every amount stays far below 2^53, so the conversion is exact.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => Number(v));
// Plain dates stay 'YYYY-MM-DD' strings: turning them into JS Dates would shift them by the process time zone.
pg.types.setTypeParser(pg.types.builtins.DATE, (v) => v);

export type Db = Knex;

export interface Database {
  /** Connections as the connecting user: the schema owner, for migrations and operator commands. */
  db: Knex;
  url: string;
  /**
   * Connections of the API, the admin API, its ingest or the worker: each runs as that service role, all but the
   * worker's with a time limit (connectionSetup()); the ingest pool is INGEST_POOL_MAX connections at most.
   */
  forRole(role: ServiceRole): Knex;
  /** A connection of its own, outside the pools, as `role` and set up as its pool's are (for LISTEN); the caller ends it. */
  connectAs(role: ServiceRole): Promise<pg.Client>;
  /**
   * A pool on a read replica of this database (its URL), as `role`, set up as the primary's pools of that role are: the
   * roles came over with replication, so the same SET ROLE works there. Other timeouts (a lag probe's) when given.
   * Closed with the database.
   */
  forReplica(url: string, role: ServiceRole, options?: { timeouts?: PoolTimeouts; poolMax?: number }): Knex;
  /** This open migrated an empty database: every migration was applied now (a first start). */
  createdSchema: boolean;
  close(): Promise<void>;
}

/** How long a new connection may take to open. */
export const CONNECT_TIMEOUT_MS = 3000;

/**
 * How long one statement of the API may run (its connections' statement_timeout): a statement the database has not
 * finished by then is cut short (SQLSTATE 57014) and its request answered 503 `unavailable` with Retry-After, rather
 * than holding one of the pool's connections for as long as it takes (ten such requests at once took the pool from
 * every workspace). 3 s: the scale of the outage promise (a request gets 4 s to have a connection, and hears of an
 * outage within 5 s), and over 200 times the slowest search measured beside a workspace of 50,000 customers and
 * 10,000 cars (12 ms: a plate term matching a third of that workspace's cars).
 * `FRS_API_STATEMENT_TIMEOUT_MS` sets another. The worker's statements have no limit: they are the service's own,
 * bounded by their batches rather than by what a caller asks, and a calendar sweep or a retention batch cut short
 * would be retried into the same limit, never finishing, where one slow run only delays the next.
 */
export const API_STATEMENT_TIMEOUT_ENV = 'FRS_API_STATEMENT_TIMEOUT_MS';
export const API_STATEMENT_TIMEOUT_MS = wholeNumberDefault(API_STATEMENT_TIMEOUT_ENV);

/**
 * What each new connection of `role`'s processes runs before anything else: SET ROLE into its database role, and for
 * the API and the admin API the time limit of its statements, set on the session after SET ROLE (ALTER ROLE ... SET applies at login
 * only, never to a role entered with SET ROLE). Undefined when there is nothing to run (the worker with
 * FRS_DB_ROLES=off); the API's limit holds with FRS_DB_ROLES=off too.
 */
export function connectionSetup(
  database: string,
  role: ServiceRole,
  config: Pick<Config, 'dbRoles' | 'apiStatementTimeoutMs'> = processConfig(),
): string | undefined {
  const statements = [
    setRoleStatement(database, role, config.dbRoles),
    role !== 'worker' ? `SET statement_timeout = '${config.apiStatementTimeoutMs}ms'` : undefined,
  ];
  const setup = statements.filter((statement) => statement !== undefined);
  return setup.length > 0 ? setup.join('; ') : undefined;
}

/** How long a query may wait for a pooled connection, and how long for its answer (none: as long as it takes). */
export interface PoolTimeouts {
  acquireMs: number;
  queryMs?: number;
  /** How long a new connection may take to open; CONNECT_TIMEOUT_MS unless given. */
  connectMs?: number;
}

/** Operator commands (migrations, seeds, imports): patient, and a bulk statement may take minutes. */
const OPERATOR_TIMEOUTS: PoolTimeouts = { acquireMs: 30_000 };

/**
 * The API's and the worker's: short, so that during an outage a request fails in seconds, as a 503, instead of
 * waiting out a 30 s pool time-out, and a database that went silent without closing (a lost host, a network split,
 * a paused server) cannot hold a request or a sweep for the two hours TCP takes to notice. The API's stay under the
 * 5 s the document promises (a connection within 3 s, or a pooled one within 4 s, and an answer within 4 s); the
 * worker's statements (a calendar sweep or a retention batch on a large workspace) get a minute.
 */
export const SERVICE_TIMEOUTS: Record<ServiceRole, PoolTimeouts> = {
  api: { acquireMs: 4000, queryMs: 4000 },
  // the admin API answers requests as the API does, under the same promise and statement limit
  admin: { acquireMs: 4000, queryMs: 4000 },
  // its batch writes keep the statement limit (set on the session), but no answer limit on the connection: an import
  // job lifts the statement limit in its transaction, as a first load's rebuild of the totals may take minutes
  ingest: { acquireMs: 4000 },
  worker: { acquireMs: 4000, queryMs: 60_000 },
};

/**
 * The ingest pool's size (batch writes and import jobs, in the admin API's process): small, so that the platform's
 * loads never hold more of the database's connections than this, whatever arrives. Running import jobs each hold one
 * for their whole transaction, and are capped below it (src/core/import/jobs.ts), so batches and progress always get one.
 */
export const INGEST_POOL_MAX = 5;

/** Pools smaller than the process's default, by role. */
const SERVICE_POOL_MAX: Partial<Record<ServiceRole, number>> = { ingest: INGEST_POOL_MAX };

/** A role's pool limits; the API's answer limit stays a second above its statement limit (FRS_API_STATEMENT_TIMEOUT_MS). */
function serviceTimeouts(role: ServiceRole): PoolTimeouts {
  const timeouts = SERVICE_TIMEOUTS[role];
  return role !== 'worker' && role !== 'ingest'
    ? { ...timeouts, queryMs: Math.max(timeouts.queryMs ?? 0, processConfig().apiStatementTimeoutMs + 1000) }
    : timeouts;
}

type PgConnection = pg.Client & { __knex__disposed?: unknown; connection: { stream: { destroy(): void } } };

/**
 * pg's query_timeout fails the query but leaves its connection waiting for the answer, and the next query on it
 * would queue behind that one: a connection whose query timed out is given up (knex drops a disposed connection
 * instead of pooling it again; the server ends the statement and its transaction when the socket closes).
 */
function discardOnQueryTimeout(connection: PgConnection): void {
  const query = connection.query.bind(connection) as (...args: unknown[]) => unknown;
  const timedOut = (err: unknown) => {
    if ((err as Error | undefined)?.message !== 'Query read timeout') return;
    connection.__knex__disposed = err;
    connection.connection.stream.destroy();
  };
  connection.query = ((...args: unknown[]) => {
    const done = args[args.length - 1];
    if (typeof done === 'function') {
      args[args.length - 1] = (err: unknown, result: unknown) => {
        if (err) timedOut(err);
        (done as (err: unknown, result: unknown) => void)(err, result);
      };
      return query(...args);
    }
    const result = query(...args) as Promise<unknown> | undefined;
    result?.catch?.(timedOut); // (a branch of its own: the caller still gets the rejection)
    return result;
  }) as typeof connection.query;
}

export function createKnex(
  url: string,
  poolMax = 10,
  onConnect?: string,
  timeouts: PoolTimeouts = OPERATOR_TIMEOUTS,
): Knex {
  return knexFactory({
    client: 'pg',
    connection: {
      connectionString: url,
      connectionTimeoutMillis: timeouts.connectMs ?? CONNECT_TIMEOUT_MS,
      // (pg's query_timeout also bounds an answer that never comes; keepalive finds a vanished peer of an idle one)
      ...(timeouts.queryMs !== undefined && { query_timeout: timeouts.queryMs }),
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    },
    pool: {
      min: 0,
      max: poolMax,
      // Every new connection first runs `onConnect` (connectionSetup()); a connection that cannot is not used.
      ...((onConnect || timeouts.queryMs !== undefined) && {
        afterCreate: (connection: PgConnection, done: (err: Error | null, connection: PgConnection) => void) => {
          if (timeouts.queryMs !== undefined) discardOnQueryTimeout(connection);
          if (!onConnect) return done(null, connection);
          connection.query(onConnect, (err: Error | null) => done(err, connection));
        },
      }),
    },
    acquireConnectionTimeout: timeouts.acquireMs,
    // Errors name the failing SQL but never its bound values: they may be keys' hashes or signing secrets.
    compileSqlOnError: false,
    // Knex prints connection errors with their stack on stdout by itself; every one of them also rejects the query
    // that met it, and is reported there (one line from the CLI and from start-up).
    log: { warn: () => undefined, error: () => undefined, debug: () => undefined, deprecate: () => undefined },
  });
}

export interface OpenOptions {
  /** Connection string; when absent the embedded cluster under .data/ is used (started if nobody runs it). */
  url?: string;
  /** Embedded cluster directory and port, for tests that want their own. */
  embeddedDir?: string;
  embeddedPort?: number;
  embeddedDatabase?: string;
  /** fsync on in the embedded cluster (the default); off only for throwaway ones (see EmbeddedOptions). */
  embeddedDurable?: boolean;
  /**
   * `migrate`: apply pending migrations (only `fleet-admin migrate`, and `npm start` on the embedded default);
   * `check` (the default): refuse a database with pending migrations; `as-is`: neither.
   */
  schema?: 'migrate' | 'check' | 'as-is';
  poolMax?: number;
}

/** One line of advice for a database that does not answer; the URL's password is left out. */
function unreachable(url: string, err: { code?: string; message?: string }): ConfigError {
  const { hostname, port, pathname } = new URL(url);
  const where = `${hostname}:${port || 5432}${pathname}`;
  const reasons: Record<string, string> = {
    ECONNREFUSED: 'connection refused (is PostgreSQL running there?)',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host name lookup failed',
    ETIMEDOUT: 'timed out',
    '28P01': 'password authentication failed',
    '28000': 'the server refused this user',
    '3D000': 'the database does not exist (create it, or fix the name)',
  };
  const message = err.message ?? 'unknown error';
  const reason =
    reasons[err.code ?? ''] ?? (message.startsWith('Knex: Timeout') ? 'timed out' : message.split('\n')[0]);
  return new ConfigError(
    `cannot connect to the database at ${where}: ${reason}; check DATABASE_URL (unset it to use the embedded database)`,
  );
}

export async function openDatabase(options: OpenOptions = {}): Promise<Database> {
  let url = options.url ?? processConfig().databaseUrl;
  let stopEmbedded = async () => undefined as void;
  if (!url) {
    const embedded = await startEmbeddedPostgres(
      options.embeddedDir ?? path.join(processConfig().dataDir, 'postgres'),
      options.embeddedPort ?? processConfig().embeddedPort,
      options.embeddedDatabase,
      { durable: options.embeddedDurable },
    );
    url = embedded.url;
    stopEmbedded = embedded.stop;
  }
  const db = createKnex(url, options.poolMax);
  try {
    await db.raw('SELECT 1');
  } catch (err) {
    await db.destroy();
    await stopEmbedded();
    throw unreachable(url, err as { code?: string; message?: string });
  }
  const roles = new Map<ServiceRole, Knex>();
  const replicas: Knex[] = [];
  try {
    const schema = options.schema ?? 'check';
    let createdSchema = false;
    if (schema === 'migrate') {
      const pendingBefore = await pendingMigrations(db);
      const all = await migrationSource().getMigrations([]);
      await migrateLatest(db);
      createdSchema = pendingBefore.length === all.length;
    }
    if (schema === 'check') {
      const pending = await pendingMigrations(db);
      if (pending.length > 0) throw new SchemaBehindError(pending);
    }
    const database = await currentDatabaseName(db);
    return {
      db,
      url,
      createdSchema,
      forRole(role) {
        let knex = roles.get(role);
        const poolMax = Math.min(options.poolMax ?? 10, SERVICE_POOL_MAX[role] ?? Infinity);
        if (!knex)
          roles.set(role, (knex = createKnex(url, poolMax, connectionSetup(database, role), serviceTimeouts(role))));
        return knex;
      },
      forReplica(replicaUrl, role, { timeouts = serviceTimeouts(role), poolMax = options.poolMax } = {}) {
        const knex = createKnex(replicaUrl, poolMax, connectionSetup(database, role), timeouts);
        replicas.push(knex);
        return knex;
      },
      async connectAs(role) {
        const client = new pg.Client({
          connectionString: url,
          keepAlive: true,
          connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
        });
        await client.connect();
        const setup = connectionSetup(database, role);
        try {
          if (setup) await client.query(setup);
        } catch (err) {
          await client.end().catch(() => undefined);
          throw err;
        }
        return client;
      },
      close: async () => {
        await Promise.all([db, ...roles.values(), ...replicas].map((k) => k.destroy()));
        await stopEmbedded();
      },
    };
  } catch (err) {
    await db.destroy();
    await stopEmbedded();
    throw err;
  }
}
