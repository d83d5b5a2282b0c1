// npx tsx bench/standby.ts start | stop: a hot standby of the bench's cluster, for `npm run bench` with a replica.
// The cluster is FRS_BENCH_PG_DIR (default .data/large-pg) on FRS_BENCH_PG_PORT (54479), started here if it is not
// running; the standby is FRS_BENCH_STANDBY_DIR (default .data/large-pg-standby) on FRS_BENCH_STANDBY_PORT (54480),
// made from it as the replica tests make theirs (test/support/replication.ts: pg_backup_start, a file copy,
// pg_backup_stop), the first time only. `start` prints the DATABASE_URL and DATABASE_READ_URL to run the bench with;
// `stop` stops both, deletes the standby and drops its replication slot (which would otherwise keep WAL for ever).
import path from 'node:path';
import pg from 'pg';
import fs from 'node:fs';
import { processConfig } from '../src/config.js';
import { startEmbeddedPostgres, stopEmbeddedPostgres } from '../src/db/embedded.js';
import { makeStandby, removeCluster, standbyCaughtUp } from '../test/support/replication.js';

const primaryDir = process.env.FRS_BENCH_PG_DIR ?? path.join(processConfig().dataDir, 'large-pg');
const primaryPort = Number(process.env.FRS_BENCH_PG_PORT ?? 54479);
const standbyDir = process.env.FRS_BENCH_STANDBY_DIR ?? path.join(processConfig().dataDir, 'large-pg-standby');
const standbyPort = Number(process.env.FRS_BENCH_STANDBY_PORT ?? 54480);
const SLOT = 'frs_bench_standby';
const DATABASE = 'fleet';

const primary = await startEmbeddedPostgres(primaryDir, primaryPort, DATABASE, { durable: false });
const adminUrl = primary.url.replace(/\/[^/]+$/, '/postgres');
const standbyUrl = primary.url.replace(`:${primaryPort}/`, `:${standbyPort}/`);
if (process.argv[2] === 'stop') {
  await stopEmbeddedPostgres(standbyDir, 'fast');
  await removeCluster(standbyDir);
  const client = new pg.Client(adminUrl);
  await client.connect();
  await client.query('SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1', [
    SLOT,
  ]);
  await client.end();
  await stopEmbeddedPostgres(primaryDir, 'fast');
  process.stderr.write(`stopped the standby (deleted) and the cluster in ${primaryDir}\n`);
} else {
  if (!fs.existsSync(path.join(standbyDir, 'PG_VERSION'))) {
    process.stderr.write(`making a standby of ${primaryDir} in ${standbyDir}...\n`);
    await makeStandby({ primaryDir, primaryPort, adminUrl, standbyDir, slot: SLOT });
  }
  await startEmbeddedPostgres(standbyDir, standbyPort, DATABASE, { durable: false });
  await standbyCaughtUp(adminUrl, standbyUrl.replace(/\/[^/]+$/, '/postgres'), 120_000);
  process.stdout.write(`DATABASE_URL=${primary.url} DATABASE_READ_URL=${standbyUrl}\n`);
}
