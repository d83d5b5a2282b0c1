import pg from 'pg';
import { openDatabase, type Database } from '../../src/db/database.js';
import { DATA_DIR } from '../../src/config.js';
import path from 'node:path';

// One database for the whole run. With DATABASE_URL the tests use that database as it is (every test makes its
// own workspaces, so they coexist with other data); otherwise a fresh database on the embedded test cluster.
const TEST_PORT = Number(process.env.FRS_TEST_PG_PORT ?? 54339);
let shared: Promise<Database> | undefined;

async function open(): Promise<Database> {
  if (process.env.DATABASE_URL) return openDatabase({ url: process.env.DATABASE_URL });
  const dir = path.join(DATA_DIR, 'test-postgres');
  // Start the cluster through openDatabase on the maintenance database, then recreate the test database.
  const admin = await openDatabase({ embeddedDir: dir, embeddedPort: TEST_PORT, embeddedDatabase: 'postgres', migrate: false });
  const client = new pg.Client(admin.url);
  await client.connect();
  await client.query('DROP DATABASE IF EXISTS fleet_test WITH (FORCE)');
  await client.query('CREATE DATABASE fleet_test');
  await client.end();
  await admin.db.destroy();
  const test = await openDatabase({ url: admin.url.replace(/\/postgres$/, '/fleet_test') });
  return { ...test, close: async () => { await test.close(); await admin.close(); } };
}

export function testDatabase(): Promise<Database> {
  shared ??= open();
  return shared;
}

export async function closeTestDatabase(): Promise<void> {
  if (shared) await (await shared).close();
  shared = undefined;
}
