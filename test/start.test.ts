import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import pg from 'pg';
import { dropDatabase, testDatabase } from './support/database.js';
import { passwordFile, startEmbeddedPostgres } from '../src/db/embedded.js';

// `npm start` as a process (src/main.ts under tsx): which database it migrates, when it loads the demo workspace,
// and that the embedded cluster it creates is not an open superuser.

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const TSX = fileURLToPath(new URL('../node_modules/tsx/dist/cli.mjs', import.meta.url));

interface Started {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Starts the service, waits for its banner (or its exit), stops it with SIGTERM and returns what it printed. */
async function startAndStop(env: Record<string, string>): Promise<Started> {
  const child: ChildProcess = spawn(process.execPath, [TSX, MAIN], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'warn', FRS_ROLE: 'api', FRS_METRICS_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  await new Promise<void>((resolve) => {
    child.stdout!.on('data', (chunk) => {
      stdout += chunk;
      if (stdout.includes('Database: ')) resolve();
    });
    child.stderr!.on('data', (chunk) => { stderr += chunk; });
    void exited.then(() => resolve());
  });
  child.kill('SIGTERM');
  return { code: await exited, stdout, stderr };
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });

describe('npm start', () => {
  describe('on DATABASE_URL', () => {
    let adminUrl: string;
    let url: string;
    const name = `fleet_start_${process.pid}`;

    before(async () => {
      ({ url: adminUrl } = await testDatabase());
      const admin = new pg.Client(adminUrl);
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.query(`CREATE DATABASE "${name}"`);
      await admin.end();
      url = adminUrl.replace(/\/[^/?]+(\?|$)/, `/${name}$1`);
    });
    after(() => dropDatabase(adminUrl, name));

    const demoWorkspaces = async () => {
      const client = new pg.Client(url);
      await client.connect();
      try {
        return (await client.query(`SELECT slug FROM workspaces WHERE slug = 'demo'`)).rows.length;
      } finally {
        await client.end();
      }
    };

    it('refuses a database whose schema is behind instead of migrating it', async () => {
      const run = await startAndStop({ DATABASE_URL: url });
      expect(run.code).to.equal(1);
      expect(run.stderr).to.include('checking its schema…');
      expect(run.stderr).to.match(/failed to start: the database schema is not up to date \(\d+ migration\(s\) pending, first 20261122000100_core_schema\): run "npx fleet-admin migrate"/);
    });

    it('loads the demo workspace with FRS_SEED_DEMO=1 (checked: 1 or 0)', async () => {
      const migrate = spawn(process.execPath, [fileURLToPath(new URL('../bin/fleet-admin.js', import.meta.url)), 'migrate', '--json'], { env: { ...process.env, DATABASE_URL: url } });
      expect(await new Promise((resolve) => migrate.on('close', resolve))).to.equal(0);

      // (Without FRS_SEED_DEMO a DATABASE_URL database is never seeded: see the embedded default's second start.)
      const seeded = await startAndStop({ DATABASE_URL: url, FRS_SEED_DEMO: '1' });
      expect(seeded.stdout).to.include('Fleet Rental Service is listening on http://127.0.0.1:');
      expect(seeded.stdout).to.match(/Demo workspace "demo" loaded\. Its API key, shown this once:\n {2}frs_[0-9A-Za-z]{40}\n/);
      expect(await demoWorkspaces()).to.equal(1);

      const bad = await startAndStop({ DATABASE_URL: url, FRS_SEED_DEMO: 'yes' });
      expect(bad.code).to.equal(1);
      expect(bad.stderr).to.include('FRS_SEED_DEMO must be 1 or 0, got "yes"');
    });
  });

  describe('on the embedded default (a data folder of its own)', () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-start-'));
    // As root the cluster runs as the postgres user, who must be able to enter the folder.
    fs.chmodSync(dataDir, 0o755);
    let port: number;
    before(async () => {
      port = await freePort();
    });
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

    it('migrates and loads the demo on the first start only (a deleted demo stays deleted), with a random superuser password kept 0600, renewed on an old cluster', async () => {
      const env = { DATABASE_URL: '', FRS_DATA_DIR: dataDir, FRS_EMBEDDED_PORT: String(port) };
      const first = await startAndStop(env);
      expect(first.stderr).not.to.include('failed');
      expect(first.stderr).to.include('and applying migrations: done');
      expect(first.stdout).to.include(`Database: embedded PostgreSQL under ${path.join(dataDir, 'postgres')}`);
      expect(first.stdout).to.match(/Demo workspace "demo" loaded\. Its API key, shown this once:\n {2}frs_[0-9A-Za-z]{40}\n/);

      const file = passwordFile(path.join(dataDir, 'postgres'));
      expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
      const password = fs.readFileSync(file, 'utf8').trim();
      expect(password).to.match(/^[A-Za-z0-9_-]{32}$/);

      // Delete the demo workspace; the next start (on the cluster the first one left) does not bring it back.
      const cluster = await startEmbeddedPostgres(path.join(dataDir, 'postgres'), port);
      const client = new pg.Client(cluster.url);
      await client.connect();
      expect((await client.query(`DELETE FROM workspaces WHERE slug = 'demo'`)).rowCount).to.equal(1);
      // Also make it a cluster of an earlier version: the fixed password 'postgres' and no password file.
      await client.query(`ALTER ROLE postgres PASSWORD 'postgres'`);
      await client.end();
      await cluster.stop();
      fs.unlinkSync(file);
      const second = await startAndStop(env);
      expect(second.stdout).to.include(`Database: embedded PostgreSQL under ${path.join(dataDir, 'postgres')}`);
      expect(second.stdout).not.to.include('Demo workspace');
      // It got a new random password, and the old one no longer opens it.
      const renewed = fs.readFileSync(file, 'utf8').trim();
      expect(renewed).to.match(/^[A-Za-z0-9_-]{32}$/).and.not.equal(password);
      expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
      const again = await startEmbeddedPostgres(path.join(dataDir, 'postgres'), port);
      try {
        const legacy = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', password: 'postgres', database: 'postgres' });
        const refused = await legacy.connect().then(() => 'connected', (err: { code?: string }) => err.code);
        await legacy.end().catch(() => undefined);
        expect(refused).to.equal('28P01');
      } finally {
        await again.stop();
      }
    });
  });
});
