import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { ConfigError, DATA_DIR, databaseUrlFromEnv } from '../config.js';
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
  /** Connections of the API or the worker: each runs as that service role, the API's with a time limit (connectionSetup()). */
  forRole(role: ServiceRole): Knex;
  /** A connection of its own, outside the pools, as `role` and set up as its pool's are (for LISTEN); the caller ends it. */
  connectAs(role: ServiceRole): Promise<pg.Client>;
  /** This open migrated an empty database: every migration was applied now (a first start). */
  createdSchema: boolean;
  close(): Promise<void>;
}

export const EMBEDDED_PORT = Number(process.env.FRS_EMBEDDED_PORT ?? 54329);

/**
 * How long a new connection may take to open, and how long a query of the API or the worker may wait for a pooled
 * connection: short, so that a request during an outage fails in seconds, as a 503, instead of waiting out a 30 s
 * pool time-out; together they stay under the 5 s the document promises. Operator commands (migrations, seeds,
 * imports) keep the patient 30 s.
 */
export const CONNECT_TIMEOUT_MS = 3000;
export const SERVICE_ACQUIRE_TIMEOUT_MS = 4000;
const OPERATOR_ACQUIRE_TIMEOUT_MS = 30_000;

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
export const API_STATEMENT_TIMEOUT_MS = 3000;
export const API_STATEMENT_TIMEOUT_ENV = 'FRS_API_STATEMENT_TIMEOUT_MS';

export function apiStatementTimeoutMs(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env[API_STATEMENT_TIMEOUT_ENV];
  if (raw === undefined || raw === '') return API_STATEMENT_TIMEOUT_MS;
  const ms = Number(raw);
  if (!/^\d+$/.test(raw) || ms < 100 || ms > 60_000) {
    throw new ConfigError(`${API_STATEMENT_TIMEOUT_ENV} must be a whole number of milliseconds from 100 to 60000, got "${raw}"`);
  }
  return ms;
}

/**
 * What each new connection of `role`'s processes runs before anything else: SET ROLE into its database role, and for
 * the API the time limit of its statements, set on the session after SET ROLE (ALTER ROLE ... SET applies at login
 * only, never to a role entered with SET ROLE). Undefined when there is nothing to run (the worker with
 * FRS_DB_ROLES=off); the API's limit holds with FRS_DB_ROLES=off too.
 */
export function connectionSetup(database: string, role: ServiceRole, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const statements = [setRoleStatement(database, role, env), role === 'api' ? `SET statement_timeout = '${apiStatementTimeoutMs(env)}ms'` : undefined];
  const setup = statements.filter((statement) => statement !== undefined);
  return setup.length > 0 ? setup.join('; ') : undefined;
}

export function createKnex(url: string, poolMax = 10, onConnect?: string, acquireTimeoutMs = OPERATOR_ACQUIRE_TIMEOUT_MS): Knex {
  type Connection = { query(sql: string, done: (err: Error | null) => void): void };
  return knexFactory({
    client: 'pg',
    // keepAlive: a connection whose server vanished without a word (a host lost, a cable cut) is found dead
    connection: { connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true },
    pool: {
      min: 0,
      max: poolMax,
      // Every new connection first runs `onConnect` (connectionSetup()); a connection that cannot is not used.
      ...(onConnect && {
        afterCreate: (connection: Connection, done: (err: Error | null, connection: Connection) => void) =>
          connection.query(onConnect, (err) => done(err, connection)),
      }),
    },
    acquireConnectionTimeout: acquireTimeoutMs,
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
  const reason = reasons[err.code ?? ''] ?? (message.startsWith('Knex: Timeout') ? 'timed out' : message.split('\n')[0]);
  return new ConfigError(`cannot connect to the database at ${where}: ${reason}; check DATABASE_URL (unset it to use the embedded database)`);
}

export async function openDatabase(options: OpenOptions = {}): Promise<Database> {
  let url = options.url ?? databaseUrlFromEnv();
  let stopEmbedded = async () => undefined as void;
  if (!url) {
    const embedded = await startEmbeddedPostgres(
      options.embeddedDir ?? path.join(DATA_DIR, 'postgres'),
      options.embeddedPort ?? EMBEDDED_PORT,
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
        if (!knex) roles.set(role, (knex = createKnex(url, options.poolMax, connectionSetup(database, role), SERVICE_ACQUIRE_TIMEOUT_MS)));
        return knex;
      },
      async connectAs(role) {
        const client = new pg.Client({ connectionString: url, keepAlive: true, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
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
        await Promise.all([db, ...roles.values()].map((k) => k.destroy()));
        await stopEmbedded();
      },
    };
  } catch (err) {
    await db.destroy();
    await stopEmbedded();
    throw err;
  }
}
