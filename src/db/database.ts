import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { ConfigError, DATA_DIR, databaseUrlFromEnv } from '../config.js';
import { startEmbeddedPostgres } from './embedded.js';
import { migrateLatest } from './migrate.js';

// node-postgres returns bigint and numeric as strings; money is bigint fils and must reach JSON as a number.
// Every amount stays far below 2^53, so the conversion is exact.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => Number(v));
// Plain dates stay 'YYYY-MM-DD' strings: turning them into JS Dates would shift them by the process time zone.
pg.types.setTypeParser(pg.types.builtins.DATE, (v) => v);

export type Db = Knex;

export interface Database {
  db: Knex;
  url: string;
  close(): Promise<void>;
}

export const EMBEDDED_PORT = Number(process.env.FRS_EMBEDDED_PORT ?? 54329);

export function createKnex(url: string, poolMax = 10): Knex {
  return knexFactory({
    client: 'pg',
    connection: url,
    pool: { min: 0, max: poolMax },
    acquireConnectionTimeout: 30_000,
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
  migrate?: boolean;
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
  if (options.migrate !== false) await migrateLatest(db);
  return {
    db,
    url,
    close: async () => {
      await db.destroy();
      await stopEmbedded();
    },
  };
}
