import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Knex } from 'knex';
import { openDatabase, type Database } from '../../src/db/database.js';
import { isRunning, startEmbeddedPostgres, stopEmbeddedPostgres } from '../../src/db/embedded.js';
import { processConfig } from '../../src/config.js';
import { SERVICE_ROLES, serviceRoleName } from '../../src/db/roles.js';
import { recordPublicKey } from '../../src/webhooks/sealing.js';

// One database for the whole run. With DATABASE_URL the tests use that database as it is (every test makes its
// own workspaces, so they coexist with other data); otherwise a database of this run's own on the embedded test
// cluster, so that runs in parallel (several developers on one machine) don't collide.
const TEST_PORT = Number(process.env.FRS_TEST_PG_PORT ?? 54339);
const PREFIX = 'fleet_test_';
let shared: Promise<Database> | undefined;

async function adminQuery<T extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Drops a database of the tests and its service roles (roles are cluster-wide, see src/db/roles.ts). */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  await adminQuery(adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  for (const role of SERVICE_ROLES) await adminQuery(adminUrl, `DROP ROLE IF EXISTS "${serviceRoleName(name, role)}"`);
}

/**
 * .data/<name> (test-postgres: the test cluster), unless the tests run as root in a checkout the `postgres` user (who
 * runs the cluster for root) cannot reach, such as one under a private home directory: then a folder under the
 * system's temp dir.
 */
export function testClusterDir(name = 'test-postgres'): string {
  const dir = path.join(processConfig().dataDir, name);
  if (os.userInfo().uid !== 0) return dir;
  for (let parent = path.dirname(dir); parent !== path.dirname(parent); parent = path.dirname(parent)) {
    if (fs.existsSync(parent) && (fs.statSync(parent).mode & 0o001) === 0)
      return path.join(os.tmpdir(), `fleet-rental-${name}`);
  }
  return dir;
}

/** The test cluster on TEST_PORT, or on one of the next ports when another cluster (another checkout's) holds it. */
async function startTestCluster(dir: string) {
  for (let port = TEST_PORT; ; port++) {
    try {
      // fsync off: the tests' cluster holds nothing worth keeping, and every run makes its database anew
      return await startEmbeddedPostgres(dir, port, 'postgres', { durable: false });
    } catch (err) {
      if (port >= TEST_PORT + 9 || !String((err as Error).message).includes('is taken by another PostgreSQL'))
        throw err;
    }
  }
}

/**
 * Drops the databases of runs that are over: their process is gone and nothing is connected to them (a run killed,
 * or cut short by mocha's time-out in its last hook), or they are a day old. Returns the other runs' databases left.
 */
async function dropFinishedRuns(adminUrl: string): Promise<string[]> {
  const runs = await adminQuery<{ datname: string; connected: boolean }>(
    adminUrl,
    `SELECT datname, EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datid = d.oid) AS connected
     FROM pg_database d WHERE datname ~ '^${PREFIX}[0-9]+_[0-9]+$'`,
  );
  const left: string[] = [];
  for (const { datname, connected } of runs) {
    const [pid, createdAt] = datname.slice(PREFIX.length).split('_').map(Number);
    if ((!connected && !isRunning(pid)) || createdAt < Date.now() - 86_400_000) await dropDatabase(adminUrl, datname);
    else left.push(datname);
  }
  return left;
}

/** How far the server's clock is from this process's, in seconds. */
async function clockSkewSeconds(adminUrl: string): Promise<number> {
  const before = Date.now();
  const [{ ms }] = await adminQuery<{ ms: number }>(
    adminUrl,
    'SELECT extract(epoch FROM clock_timestamp()) * 1000 AS ms',
  );
  return (ms - (before + Date.now()) / 2) / 1000;
}

/**
 * The test cluster, running under this run's clock. A cluster left running by a run under another clock (faketime, see
 * scripts/test-dates.ts: the server reads the clock it was started with) would answer now() from that clock; when no
 * run uses it any more it is started again, under this one.
 */
async function testCluster() {
  const dir = testClusterDir();
  const cluster = await startTestCluster(dir);
  const skew = await clockSkewSeconds(cluster.url);
  if (Math.abs(skew) < 60) return { ...cluster, dir };
  const users = await dropFinishedRuns(cluster.url);
  if (users.length > 0) {
    throw new Error(
      `the test cluster in ${dir} runs with a clock ${Math.round(skew)} s away from this run's, and runs are using it (${users.join(', ')}): ` +
        'wait for them, or give this run a cluster of its own with FRS_DATA_DIR',
    );
  }
  await stopEmbeddedPostgres(dir);
  return { ...(await startTestCluster(dir)), dir };
}

/** Ends `closing` if it has not ended within `ms` (what is left open is this process's, and goes with it). */
async function within(ms: number, closing: Promise<void>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    closing,
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The tests' own writes keep the running totals in their transaction, as the service's writers do (src/db/upkeep.ts):
 * a fixture written a moment before a request is in its figures. A test of direct writers says `frs.upkeep = deferred`
 * on its connections, as the platform's writers are, and applies the queue with upkeep_fold().
 */
const INLINE_UPKEEP = `frs.upkeep = 'inline'`;

/**
 * Makes the sessions of the database at `url` keep the running totals inline (a test's own cluster, say). Returns how
 * to put back the database's own setting (none, or what it was): a database given by DATABASE_URL is not the tests'.
 */
export async function keepUpkeepInlineIn(url: string): Promise<() => Promise<void>> {
  const [{ name, setting }] = await adminQuery<{ name: string; setting: string | null }>(
    url,
    `
    SELECT quote_ident(d.datname) AS name,
           (SELECT quote_literal(substr(c, length('frs.upkeep=') + 1)) FROM pg_db_role_setting s, unnest(s.setconfig) c
            WHERE s.setdatabase = d.oid AND s.setrole = 0 AND c LIKE 'frs.upkeep=%') AS setting
    FROM pg_database d WHERE d.datname = current_database()`,
  );
  await adminQuery(url, `ALTER DATABASE ${name} SET ${INLINE_UPKEEP}`);
  return async () => {
    await adminQuery(
      url,
      setting === null
        ? `ALTER DATABASE ${name} RESET frs.upkeep`
        : `ALTER DATABASE ${name} SET frs.upkeep = ${setting}`,
    );
  };
}

async function open(): Promise<Database> {
  // As a worker's start does, the public key of the tests' master key is recorded: processes holding no master key
  // (the API's, the admin API's) seal to it.
  if (process.env.DATABASE_URL) {
    const url = process.env.DATABASE_URL;
    const putBack = await keepUpkeepInlineIn(url);
    const given = await recorded(await openDatabase({ url, schema: 'migrate' }));
    // (the given database's own upkeep setting, put back when the run ends)
    return { ...given, close: () => given.close().finally(putBack) };
  }
  const cluster = await testCluster();
  const name = `${PREFIX}${process.pid}_${Date.now()}`;
  await dropFinishedRuns(cluster.url);
  await adminQuery(cluster.url, `CREATE DATABASE "${name}"`);
  await adminQuery(cluster.url, `ALTER DATABASE "${name}" SET ${INLINE_UPKEEP}`);
  const test = await recorded(
    await openDatabase({ url: cluster.url.replace(/\/postgres$/, `/${name}`), schema: 'migrate' }),
  );
  return {
    ...test,
    // Run from the root afterAll, also after a test that mocha's time-out cut short while it still held connections
    // (a transaction waiting on a lock, say): the pools would wait for those for ever. Dropping the database first ends
    // their sessions (WITH (FORCE)), so they are given back; and whatever happens, the cluster is stopped when this is
    // the last run on it, so that no run leaves it behind.
    close: async () => {
      try {
        await dropDatabase(cluster.url, name);
        await within(10_000, test.close());
      } finally {
        if ((await dropFinishedRuns(cluster.url).catch(() => ['(unknown)'])).length === 0)
          await stopEmbeddedPostgres(cluster.dir);
      }
    },
  };
}

async function recorded(database: Database): Promise<Database> {
  await recordPublicKey(database.db);
  return database;
}

export function testDatabase(): Promise<Database> {
  shared ??= open();
  return shared;
}

export async function closeTestDatabase(): Promise<void> {
  if (shared) await (await shared).close();
  shared = undefined;
}

/**
 * Whether the backend `pid` comes to wait on a lock within about 2 s (polled every 20 ms through `db`): how a test
 * shows that one real transaction waits for another.
 */
export async function waitsForLock(
  db: { raw(sql: string, bindings: unknown[]): Promise<{ rows: Array<{ waiting?: boolean }> }> },
  pid: number,
): Promise<boolean> {
  for (let i = 0; i < 100; i++) {
    if (
      (await db.raw(`SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = ?`, [pid])).rows[0]
        ?.waiting === true
    )
      return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}

/** A query module's statement's values (named `bindings`), in its positional order, as SQL literals for EXECUTE. */
export function executeArguments(db: Knex, statement: { sql: string; bindings: Record<string, unknown> }): string {
  const { bindings } = db
    .raw(statement.sql, statement.bindings as Knex.ValueDict)
    .toSQL()
    .toNative();
  return bindings.map((value) => `'${String(value).replaceAll("'", "''")}'`).join(', ');
}

/**
 * Runs `run` on one connection (a transaction's, rolled back) and plans the one prepared statement it executed there
 * both ways PostgreSQL can, for the parameter values `values` (SQL literals, as EXECUTE takes them): the total cost of
 * the generic plan and of a plan made for those values. PostgreSQL keeps the generic plan, and stops planning the
 * statement on every execution, once that costs no more than the plans made for values (after five of those).
 * Fails when `run` executed no prepared statement, or more than one.
 */
export async function preparedPlanCosts(
  db: Knex,
  run: (trx: Knex.Transaction) => Promise<unknown>,
  values: string,
): Promise<{ generic: number; custom: number }> {
  const trx = await db.transaction();
  try {
    // the statement `run` executed: the one whose executions (planned either way) went up
    const executions = async () =>
      new Map<string, number>(
        (await trx.raw('SELECT name, custom_plans + generic_plans AS n FROM pg_prepared_statements')).rows.map(
          (r: { name: string; n: string }) => [r.name, Number(r.n)],
        ),
      );
    const before = await executions();
    await run(trx);
    const names = [...(await executions())].filter(([name, n]) => n > (before.get(name) ?? 0)).map(([name]) => name);
    if (names.length !== 1)
      throw new Error(`preparedPlanCosts(): expected one prepared statement to run, got ${names.length}`);
    const cost = async (mode: string) => {
      await trx.raw(`SET LOCAL plan_cache_mode = ${mode}`);
      const [
        {
          'QUERY PLAN': [{ Plan: plan }],
        },
      ] = (await trx.raw(`EXPLAIN (FORMAT JSON) EXECUTE "${names[0]}"(${values})`)).rows;
      return plan['Total Cost'] as number;
    };
    return { generic: await cost('force_generic_plan'), custom: await cost('force_custom_plan') };
  } finally {
    await trx.rollback();
  }
}

/** A node of EXPLAIN (ANALYZE, FORMAT JSON): the fields the plan tests read. */
export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

type PgConnection = { query(text: string): Promise<{ rows: Array<Record<string, any>> }> };

/**
 * EXPLAIN (ANALYZE, FORMAT JSON) of a query module's statement (`sql` with named `bindings`) run as the API runs it, as
 * a prepared statement, with each of the plans PostgreSQL may run it with: one made for the values bound (its first
 * five executions, and any after them that costs less) and the generic one it keeps once that costs no more.
 */
export async function preparedPlans(
  db: Knex,
  statement: { sql: string; bindings: Record<string, unknown> },
): Promise<{ custom: PlanNode; generic: PlanNode }> {
  const { sql } = db
    .raw(statement.sql, statement.bindings as Knex.ValueDict)
    .toSQL()
    .toNative();
  const values = executeArguments(db, statement);
  const connection = (await db.client.acquireConnection()) as PgConnection;
  try {
    await connection.query(`PREPARE frs_explained AS ${sql}`);
    const explain = async (mode: string) => {
      await connection.query(`SET plan_cache_mode = ${mode}`);
      return (await connection.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE frs_explained(${values})`)).rows[0][
        'QUERY PLAN'
      ][0].Plan as PlanNode;
    };
    return { custom: await explain('force_custom_plan'), generic: await explain('force_generic_plan') };
  } finally {
    await connection.query('DEALLOCATE frs_explained; RESET plan_cache_mode').catch(() => undefined);
    await db.client.releaseConnection(connection);
  }
}

/**
 * Every scan of `table` in `plan`, of the table itself or of one of its indexes, with how many rows it read over all
 * its loops (those it returned, and those it read and then removed, by its filter or by the recheck of a lossy index's
 * matches), and whether it is a scan of a trigram index.
 */
export async function scansOf(
  db: Knex,
  plan: PlanNode,
  table: string,
): Promise<Array<{ scan: string; read: number; trigram: boolean }>> {
  const { rows } = await db.raw(
    `SELECT indexname, indexdef LIKE '%gin_trgm_ops%' AS trigram FROM pg_indexes WHERE tablename = ?`,
    [table],
  );
  const trigram = new Map<string, boolean>(
    rows.map((r: { indexname: string; trigram: boolean }) => [r.indexname, r.trigram]),
  );
  const scans: Array<{ scan: string; read: number; trigram: boolean }> = [];
  const visit = (node: PlanNode) => {
    const index = node['Index Name'];
    if (node['Relation Name'] === table || (index !== undefined && trigram.has(index))) {
      const perLoop =
        node['Actual Rows'] + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0);
      scans.push({
        scan: `${node['Node Type']} ${index ?? table}`,
        read: perLoop * node['Actual Loops'],
        trigram: trigram.get(index ?? '') === true,
      });
    }
    node.Plans?.forEach(visit);
  };
  visit(plan);
  return scans;
}
