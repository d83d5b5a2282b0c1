import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  isRunning,
  passwordFile,
  postgresUserIds,
  startEmbeddedPostgres,
  stopEmbeddedPostgres,
} from '../../src/db/embedded.js';
import { testClusterDir } from './database.js';
import { isFree } from './ports.js';

// A primary and a hot standby streaming from it, on loopback, made with nothing but the embedded PostgreSQL's own
// binaries (initdb, pg_ctl, postgres: no pg_basebackup): the base backup is PostgreSQL's low-level API, pg_backup_start(),
// a copy of the data directory, pg_backup_stop() and its backup_label; then standby.signal and primary_conninfo.
// A physical replication slot made before the backup keeps the WAL the standby needs from the backup's start on.

export const TEST_PORT = Number(process.env.FRS_TEST_PG_PORT ?? 54339);

/**
 * The primary's and the standby's ports: FRS_TEST_REPLICA_PG_PORT and the next one, else the first two free ones of
 * the test cluster's range (TEST_PORT+1 to TEST_PORT+9; the test cluster itself may have moved into it).
 */
export async function replicaPorts(): Promise<{ primary: number; standby: number }> {
  if (process.env.FRS_TEST_REPLICA_PG_PORT) {
    const first = Number(process.env.FRS_TEST_REPLICA_PG_PORT);
    return { primary: first, standby: first + 1 };
  }
  const free: number[] = [];
  for (let port = TEST_PORT + 1; port <= TEST_PORT + 9 && free.length < 2; port++)
    if (await isFree(port)) free.push(port);
  if (free.length < 2)
    throw new Error(
      `no two free ports from ${TEST_PORT + 1} to ${TEST_PORT + 9} for the replication pair (FRS_TEST_REPLICA_PG_PORT sets them)`,
    );
  return { primary: free[0], standby: free[1] };
}

const SLOT = 'frs_test_standby';

/** What a base backup leaves out (PostgreSQL's docs, "Making a Base Backup Using the Low Level API"): the server's run files, and contents that are rebuilt. */
const LEFT_OUT = new Set([
  'postmaster.pid',
  'postmaster.opts',
  'server.log',
  'backup_label',
  'tablespace_map',
  'standby.signal',
  'recovery.signal',
]);
const EMPTIED = new Set([
  'pg_wal',
  'pg_replslot',
  'pg_dynshmem',
  'pg_notify',
  'pg_serial',
  'pg_snapshots',
  'pg_stat_tmp',
  'pg_subtrans',
]);

/** Copies a running cluster's files: files that vanish while it runs are skipped, as pg_basebackup does. */
function copyDataDirectory(from: string, to: string, top = true): void {
  fs.mkdirSync(to, { recursive: true, mode: 0o700 });
  for (const entry of fs.readdirSync(from, { withFileTypes: true })) {
    if (top && LEFT_OUT.has(entry.name)) continue;
    if (entry.name.startsWith('pgsql_tmp')) continue;
    const source = path.join(from, entry.name);
    const target = path.join(to, entry.name);
    if (entry.isDirectory()) {
      if (top && EMPTIED.has(entry.name)) {
        fs.mkdirSync(target, { mode: 0o700 });
        if (entry.name === 'pg_wal')
          for (const sub of ['archive_status', 'summaries']) fs.mkdirSync(path.join(target, sub), { mode: 0o700 });
      } else {
        copyDataDirectory(source, target, false);
      }
    } else {
      try {
        fs.copyFileSync(source, target);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
    }
  }
}

/** Hands `dir` (recursively) to the postgres user when we are root, as the clusters run as that user then. */
function ownByPostgres(dir: string): void {
  if (os.userInfo().uid !== 0) return;
  const { uid, gid } = postgresUserIds();
  const walk = (p: string) => {
    fs.chownSync(p, uid, gid);
    if (fs.statSync(p).isDirectory()) for (const name of fs.readdirSync(p)) walk(path.join(p, name));
  };
  walk(dir);
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

export interface ReplicationPair {
  /** The superuser's URLs of `database` on each. */
  primaryUrl: string;
  standbyUrl: string;
  /** Runs SQL as the superuser on the standby (replay pause and resume, pg_stat_activity). */
  onStandby<T extends pg.QueryResultRow>(sql: string): Promise<T[]>;
  /** Stops the standby as a crash would (pg_ctl stop -m immediate). */
  crashStandby(): Promise<void>;
  /** Starts the standby again (after crashStandby). */
  startStandby(): Promise<void>;
  /** Waits until the standby has replayed everything the primary wrote so far. */
  caughtUp(timeoutMs?: number): Promise<void>;
  /** Stops both clusters and deletes them. */
  stop(): Promise<void>;
}

/** Stops a cluster left in `dir` by an earlier run cut short, and deletes it. */
export async function removeCluster(dir: string): Promise<void> {
  await stopEmbeddedPostgres(dir, 'immediate').catch(() => undefined);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(passwordFile(dir), { force: true });
}

/**
 * Makes `standbyDir` a hot standby of the running cluster in `primaryDir` (superuser `adminUrl`, port `primaryPort`):
 * a replication slot `slot`, a base backup, standby.signal and primary_conninfo. Not started.
 */
export async function makeStandby(options: {
  primaryDir: string;
  primaryPort: number;
  adminUrl: string;
  standbyDir: string;
  slot: string;
}): Promise<void> {
  const { primaryDir, primaryPort, adminUrl, standbyDir, slot } = options;
  const backup = new pg.Client({ connectionString: adminUrl });
  await backup.connect();
  try {
    await backup.query(`SELECT pg_create_physical_replication_slot($1, true)`, [slot]);
    await backup.query(`SELECT pg_backup_start('frs standby', true)`);
    copyDataDirectory(primaryDir, standbyDir);
    const {
      rows: [stopped],
    } = await backup.query<{ labelfile: string; spcmapfile: string | null }>(
      'SELECT labelfile, spcmapfile FROM pg_backup_stop(true)',
    );
    fs.writeFileSync(path.join(standbyDir, 'backup_label'), stopped.labelfile);
    if (stopped.spcmapfile) fs.writeFileSync(path.join(standbyDir, 'tablespace_map'), stopped.spcmapfile);
  } finally {
    await backup.end();
  }
  const password = fs.readFileSync(passwordFile(primaryDir), 'utf8').trim();
  fs.writeFileSync(path.join(standbyDir, 'standby.signal'), '');
  fs.appendFileSync(
    path.join(standbyDir, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=127.0.0.1 port=${primaryPort} user=postgres password=${password} application_name=${slot}'\n` +
      `primary_slot_name = '${slot}'\n`,
  );
  // the standby's superuser is the primary's (replicated), and so is its password
  fs.writeFileSync(passwordFile(standbyDir), `${password}\n`, { mode: 0o600 });
  ownByPostgres(standbyDir);
  fs.chmodSync(standbyDir, 0o700);
}

/** Waits until the standby (`standbyAdminUrl`) has replayed everything the primary (`adminUrl`) wrote so far. */
export async function standbyCaughtUp(adminUrl: string, standbyAdminUrl: string, timeoutMs = 10_000): Promise<void> {
  const [{ lsn }] = await query<{ lsn: string }>(adminUrl, 'SELECT pg_current_wal_lsn()::text AS lsn');
  for (const until = Date.now() + timeoutMs; ;) {
    const [{ done }] = await query<{ done: boolean }>(
      standbyAdminUrl,
      `SELECT pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn AS done`,
    );
    if (done) return;
    if (Date.now() > until) throw new Error(`the standby did not replay ${lsn} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const PAIR_DIR = /(?:^|-)replica-test-(?:primary|standby)-([0-9]+)$/;

/** Removes the pairs of runs whose process is gone (killed before their `after` hook). */
async function removeFinishedPairs(): Promise<void> {
  const parent = path.dirname(testClusterDir('replica-test-primary-0'));
  for (const name of fs.existsSync(parent) ? fs.readdirSync(parent) : []) {
    const run = PAIR_DIR.exec(name);
    if (run && !isRunning(Number(run[1]))) await removeCluster(path.join(parent, name));
  }
}

/** A primary and a hot standby in directories of this run's own (with its pid: two runs never touch each other's). */
export async function startReplicationPair(
  database: string,
  ports?: { primary: number; standby: number },
): Promise<ReplicationPair> {
  await removeFinishedPairs();
  ports ??= await replicaPorts();
  const primaryDir = testClusterDir(`replica-test-primary-${process.pid}`);
  const standbyDir = testClusterDir(`replica-test-standby-${process.pid}`);
  await removeCluster(standbyDir);
  await removeCluster(primaryDir);
  const stopAll = async () => {
    try {
      await stopEmbeddedPostgres(standbyDir, 'immediate').catch(() => undefined);
      await stopEmbeddedPostgres(primaryDir, 'fast').catch(() => undefined);
    } finally {
      await removeCluster(standbyDir).finally(() => removeCluster(primaryDir));
    }
  };
  try {
    // (the defaults already stream: wal_level=replica, max_wal_senders=10, hot_standby=on, and initdb's pg_hba.conf
    // lets the superuser replicate from 127.0.0.1 with a password)
    const primary = await startEmbeddedPostgres(primaryDir, ports.primary, database, { durable: false });
    const adminUrl = primary.url.replace(/\/[^/]+$/, '/postgres');
    await makeStandby({ primaryDir, primaryPort: ports.primary, adminUrl, standbyDir, slot: SLOT });
    const startStandby = async () => {
      await startEmbeddedPostgres(standbyDir, ports!.standby, database, { durable: false });
    };
    await startStandby();
    const standbyUrl = primary.url.replace(`:${ports.primary}/`, `:${ports.standby}/`);
    const standbyAdminUrl = adminUrl.replace(`:${ports.primary}/`, `:${ports.standby}/`);
    const pair: ReplicationPair = {
      primaryUrl: primary.url,
      standbyUrl,
      onStandby: (sql) => query(standbyUrl, sql),
      crashStandby: () => stopEmbeddedPostgres(standbyDir, 'immediate'),
      startStandby,
      caughtUp: (timeoutMs) => standbyCaughtUp(adminUrl, standbyAdminUrl, timeoutMs),
      stop: stopAll,
    };
    await pair.caughtUp();
    return pair;
  } catch (err) {
    await stopAll();
    throw err;
  }
}
