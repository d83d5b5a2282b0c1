import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { freePort, isFree } from './support/ports.js';
import pg from 'pg';
import { dropDatabase, testDatabase } from './support/database.js';
import { fleetAdminOn } from './support/cli.js';
import { isRunning, passwordFile, startEmbeddedPostgres } from '../src/db/embedded.js';
import net from 'node:net';

// `npm start` as a person runs it: on the embedded database, in a data folder and on ports of its own, stopped by a
// signal to npm's own PID. It must stop the service and its embedded PostgreSQL, leaving both ports free and no
// postmaster.pid, with exit status 0 and no warning. Also which database it migrates (only the embedded one), when
// it loads the demo workspace, and that the embedded cluster it creates is not an open superuser.
const ROOT = fileURLToPath(new URL('..', import.meta.url));

interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

async function npmStart(env: NodeJS.ProcessEnv, readyLine: RegExp | null): Promise<Started> {
  const { DATABASE_URL: _unused, ...inherited } = process.env;
  const child = spawn('npm', ['start'], {
    cwd: ROOT,
    env: { ...inherited, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  if (readyLine) {
    // (FRS_ROLE=all starts a second process, the worker's, which loads beside the API's on a first start)
    const deadline = Date.now() + 90_000;
    while (!readyLine.test(stdout)) {
      if (Date.now() > deadline || child.exitCode !== null) {
        // stopped, so that its embedded database is not left running for the next test to trip on
        if (child.exitCode === null) {
          child.kill('SIGTERM');
          await exit;
        }
        throw new Error(`npm start did not get ready:\n${stdout}\n${stderr}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { child, stdout: () => stdout, stderr: () => stderr, exit };
}

/**
 * Stops a run still going (SIGTERM to npm's PID, as a person would) and waits for it: in a test's `finally`, so that an
 * assertion failing between start and stop leaves no service nor embedded database running.
 */
async function stopIfRunning(run: Started): Promise<void> {
  if (run.child.exitCode !== null || run.child.signalCode !== null) return;
  run.child.kill('SIGTERM');
  await run.exit;
}

/** Starts the service, lets it get ready (or fail), stops it with SIGTERM, and returns its exit status and output. */
async function startAndStop(env: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // (FRS_ROLE=api holds no master key: the tests' one is not passed on)
  const run = await npmStart(
    {
      PORT: '0',
      HOST: '127.0.0.1',
      FRS_ROLE: 'api',
      FRS_SECRET_KEY: '',
      FRS_METRICS_PORT: '0',
      FRS_ADMIN_PORT: '0',
      LOG_LEVEL: 'warn',
      ...env,
    },
    null,
  );
  const deadline = Date.now() + 45_000;
  while (!/Ready .* after launch/.test(run.stdout()) && run.child.exitCode === null && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  run.child.kill('SIGTERM');
  return { code: await run.exit, stdout: run.stdout(), stderr: run.stderr() };
}

/** Waits until `holds()` is true, checking every 100 ms; false if it still is not after `ms`. */
async function eventually(holds: () => boolean | Promise<boolean>, ms: number): Promise<boolean> {
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    if (await holds()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return holds();
}

/** The processes of this machine whose command line names `dir` (a PostgreSQL server of that data directory, say). */
function processesNaming(dir: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(dir);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The service's processes (src/main.ts: the API's and the worker's) running on the data folder `dataDir`. */
function serviceProcesses(dataDir: string): number[] {
  return fs
    .readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return (
          fs
            .readFileSync(`/proc/${pid}/cmdline`, 'utf8')
            .split('\0')
            .some((arg) => arg.endsWith('src/main.ts')) &&
          fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes(`FRS_DATA_DIR=${dataDir}`)
        );
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('npm start', function () {
  this.timeout(180_000);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-npm-start-'));
  // As root the embedded cluster runs as the postgres user, who must be able to enter the folder.
  fs.chmodSync(dataDir, 0o755);
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`stops the service and its embedded database on ${signal} to npm's PID, exit status 0`, async () => {
      const [port, pgPort, metricsPort, adminPort] = [
        await freePort(),
        await freePort(),
        await freePort(),
        await freePort(),
      ];
      const run = await npmStart(
        {
          PORT: String(port),
          HOST: '127.0.0.1',
          FRS_EMBEDDED_PORT: String(pgPort),
          FRS_METRICS_PORT: String(metricsPort),
          FRS_ADMIN_PORT: String(adminPort),
          FRS_DATA_DIR: dataDir,
        },
        /Ready .* after launch/,
      );
      try {
        // It answers, and said what it did while starting.
        const answer = await fetch(`http://127.0.0.1:${port}/openapi.json`);
        expect(answer.status).to.equal(200);
        // and so does the admin API, on its own listener (127.0.0.1 by default), with its own document
        const adminDocument = await fetch(`http://127.0.0.1:${adminPort}/openapi.json`);
        expect((await adminDocument.json()).info.title).to.equal('Fleet Rental Service admin API');
        expect(run.stdout()).to.include(`Admin API: http://127.0.0.1:${adminPort}/admin/v1`);
        expect(run.stderr()).to.match(/opening the embedded PostgreSQL .* and applying migrations: done/);
        expect(run.stderr()).to.match(/loading the API .*: done/);
        // the worker runs in a process of its own (it alone holds the master key); its counts come out on this /metrics
        const sweeps = async () => {
          const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
          return {
            count: Number(/^frs_calendar_sweep_duration_seconds_count(?:\{[^}]*\})? (\d+)/m.exec(text)?.[1] ?? 0),
            starts: text.match(/^process_start_time_seconds /gm)?.length,
          };
        };
        let scraped = await sweeps();
        for (const deadline = Date.now() + 60_000; scraped.count === 0 && Date.now() < deadline;) {
          await new Promise((resolve) => setTimeout(resolve, 250));
          scraped = await sweeps();
        }
        expect(scraped.count, "the worker process's calendar sweeps").to.be.at.least(1);
        expect(scraped.starts, "one process's start time, not a sum of two").to.equal(1);

        const sent = Date.now();
        run.child.kill(signal);
        expect(await run.exit, `npm's exit status\n${run.stderr()}`).to.equal(0);
        expect(Date.now() - sent, 'stopped within 10 s').to.be.below(10_000);
        expect(await isFree(port), 'the API port is free').to.equal(true);
        expect(await isFree(pgPort), "the embedded database's port is free").to.equal(true);
        expect(await isFree(metricsPort), 'the metrics port is free').to.equal(true);
        expect(await isFree(adminPort), 'the admin port is free').to.equal(true);
        expect(fs.existsSync(path.join(dataDir, 'postgres', 'postmaster.pid')), 'no postmaster.pid').to.equal(false);
        const logs = run
          .stdout()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line));
        expect(
          logs.filter((l) => l.level >= 40),
          'no warning or error',
        ).to.deep.equal([]);
        expect(logs.map((l) => l.msg)).to.include.members(['shutting down', 'stopped']);
      } finally {
        await stopIfRunning(run);
      }
    });
  }

  for (const setting of ['PORT', 'FRS_ADMIN_PORT', 'FRS_METRICS_PORT'] as const) {
    it(`refuses ${setting} in use by another program before starting anything, in one line naming it, exit status 1`, async () => {
      const taken = net.createServer();
      const port = await new Promise<number>((resolve) =>
        taken.listen(0, '127.0.0.1', () => resolve((taken.address() as net.AddressInfo).port)),
      );
      try {
        const ports = {
          PORT: String(await freePort()),
          FRS_ADMIN_PORT: String(await freePort()),
          FRS_METRICS_PORT: String(await freePort()),
          [setting]: String(port),
        };
        const run = await npmStart(
          { ...ports, HOST: '127.0.0.1', FRS_EMBEDDED_PORT: String(await freePort()), FRS_DATA_DIR: dataDir },
          null,
        );
        expect(await run.exit).to.equal(1);
        const advice = {
          PORT: 'PORT (and HOST)',
          FRS_ADMIN_PORT: 'FRS_ADMIN_PORT (or 0 to switch it off)',
          FRS_METRICS_PORT: 'FRS_METRICS_PORT (or 0 to switch it off)',
        }[setting];
        // one line, no stack trace, and nothing started first (no database opened, no document loaded)
        expect(
          run
            .stderr()
            .split('\n')
            .filter((line) => line.trim() !== '' && !line.startsWith('> ') && !line.startsWith('npm ')),
        ).to.deep.equal([
          `fleet-rental: failed to start: port ${port} on 127.0.0.1 is in use by another program: set ${advice} to a free port`,
        ]);
      } finally {
        taken.close();
      }
    });
  }

  for (const during of ['opening the embedded PostgreSQL', 'loading the API'] as const) {
    it(`stops at once on SIGINT while ${during}, its embedded database and worker process included, exit status 0`, async () => {
      const [port, pgPort] = [await freePort(), await freePort()];
      // A cluster made before (as by the tests above), so that the signal meets its server's start, not initdb.
      if (!fs.existsSync(path.join(dataDir, 'postgres', 'PG_VERSION')))
        await (await startEmbeddedPostgres(path.join(dataDir, 'postgres'), pgPort)).stop();
      const run = await npmStart(
        {
          PORT: String(port),
          HOST: '127.0.0.1',
          FRS_EMBEDDED_PORT: String(pgPort),
          FRS_METRICS_PORT: '0',
          FRS_ADMIN_PORT: '0',
          FRS_DATA_DIR: dataDir,
        },
        null,
      );
      try {
        const begun = new RegExp(`fleet-rental: ${during}[^\n]*…\n`);
        // (while opening: once its server is starting, postmaster.pid written, so that the signal meets a server to stop)
        const meets = () =>
          during !== 'opening the embedded PostgreSQL' ||
          fs.existsSync(path.join(dataDir, 'postgres', 'postmaster.pid'));
        expect(
          await eventually(() => (begun.test(run.stderr()) && meets()) || run.child.exitCode !== null, 90_000),
          run.stderr(),
        ).to.equal(true);
        run.child.kill('SIGINT');
        expect(await run.exit, `npm's exit status\n${run.stderr()}`).to.equal(0);
        expect(run.stdout()).not.to.include('Ready');
        // Nothing is left: no server of the data directory (not even one whose start was under way), no worker process.
        const cluster = path.join(dataDir, 'postgres');
        expect(
          await eventually(
            () => processesNaming(cluster).length > 0 || fs.existsSync(path.join(cluster, 'postmaster.pid')),
            2000,
          ),
          'a server of the data directory',
        ).to.equal(false);
        expect(serviceProcesses(dataDir), 'a process of the service').to.deep.equal([]);
        expect(await isFree(pgPort), "the embedded database's port is free").to.equal(true);
      } finally {
        await stopIfRunning(run);
      }
    });
  }

  it('refuses a DATABASE_URL that is not a URL in one line, exit status 1', async () => {
    const run = await npmStart(
      { DATABASE_URL: 'localhost/fleet', PORT: String(await freePort()), FRS_METRICS_PORT: '0', FRS_ADMIN_PORT: '0' },
      null,
    );
    expect(await run.exit).to.equal(1);
    expect(
      run
        .stderr()
        .split('\n')
        .filter((line) => line.startsWith('fleet-rental')),
    ).to.deep.equal([
      'fleet-rental: failed to start: DATABASE_URL is not a PostgreSQL URL: expected postgres://USER:PASSWORD@HOST:PORT/DATABASE (unset it to use the embedded database)',
    ]);
  });

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
      expect(run.stderr).to.match(
        /failed to start: the database schema is not up to date \(\d+ migration\(s\) pending, first 20261122000100_core_schema\): run "npx fleet-admin migrate"/,
      );
    });

    it('loads the demo workspace with FRS_SEED_DEMO=1 (checked: 1 or 0)', async () => {
      expect((await fleetAdminOn(url, ['migrate', '--json'])).code).to.equal(0);

      // (Without FRS_SEED_DEMO a DATABASE_URL database is never seeded: see the embedded default's second start.)
      const seeded = await startAndStop({ DATABASE_URL: url, FRS_SEED_DEMO: '1' });
      expect(seeded.stdout).to.include('Fleet Rental Service is listening on http://127.0.0.1:');
      expect(seeded.stdout).to.match(
        /Demo workspace "demo" loaded\. Its API key, shown this once:\n {2}frs_[0-9A-Za-z]{40}\n/,
      );
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
      const env = { FRS_DATA_DIR: dataDir, FRS_EMBEDDED_PORT: String(port) };
      const first = await startAndStop(env);
      expect(first.stderr).not.to.include('failed');
      expect(first.stderr).to.include('and applying migrations: done');
      expect(first.stdout).to.include(`Database: embedded PostgreSQL under ${path.join(dataDir, 'postgres')}`);
      expect(first.stdout).to.match(
        /Demo workspace "demo" loaded\. Its API key, shown this once:\n {2}frs_[0-9A-Za-z]{40}\n/,
      );

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
      expect(renewed)
        .to.match(/^[A-Za-z0-9_-]{32}$/)
        .and.not.equal(password);
      expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
      const again = await startEmbeddedPostgres(path.join(dataDir, 'postgres'), port);
      try {
        const legacy = new pg.Client({
          host: '127.0.0.1',
          port,
          user: 'postgres',
          password: 'postgres',
          database: 'postgres',
        });
        const refused = await legacy.connect().then(
          () => 'connected',
          (err: { code?: string }) => err.code,
        );
        await legacy.end().catch(() => undefined);
        expect(refused).to.equal('28P01');
      } finally {
        await again.stop();
      }
    });
  });

  describe('after a SIGKILL (a data folder of its own)', () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-killed-'));
    // As root the cluster runs as the postgres user, who must be able to enter the folder.
    fs.chmodSync(dataDir, 0o755);
    let port: number;
    before(async () => {
      port = await freePort();
    });
    after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

    it('after a SIGKILL, the next start takes over the cluster left running and stops it; portal link links to its port', async () => {
      const cluster = path.join(dataDir, 'postgres');
      const env = {
        FRS_DATA_DIR: dataDir,
        FRS_EMBEDDED_PORT: String(port),
        HOST: '127.0.0.1',
        FRS_METRICS_PORT: '0',
        FRS_ADMIN_PORT: '0',
        LOG_LEVEL: 'warn',
      };
      // The service's own process (not npm's), killed as the system's OOM killer or `kill -9` would: it stops nothing.
      const { DATABASE_URL: _unused, ...inherited } = process.env;
      const killed = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
        cwd: ROOT,
        env: { ...inherited, ...env, PORT: String(await freePort()) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      killed.stdout.on('data', (chunk) => {
        out += chunk;
      });
      const gone = new Promise((resolve) => killed.on('exit', resolve));
      expect(
        await eventually(() => /Ready .* after launch/.test(out) || killed.exitCode !== null, 90_000),
        out,
      ).to.equal(true);
      const workerPid = Number(/running in process (\d+)/.exec(out)?.[1]);
      killed.kill('SIGKILL');
      await gone;
      // Its worker's process goes with it (it stops when its parent goes); its PostgreSQL is left running.
      expect(await eventually(() => !isRunning(workerPid), 30_000), "the worker's process stopped").to.equal(true);
      expect(fs.existsSync(path.join(cluster, 'postmaster.pid')), 'the cluster left running').to.equal(true);

      const apiPort = await freePort();
      const next = await npmStart({ ...env, PORT: String(apiPort) }, /Ready .* after launch/);
      try {
        // `portal link` from another shell (no PORT, no FRS_PUBLIC_URL) links to the port the service listens on.
        const link = await fleetAdminOn('', ['portal', 'link', '--workspace', 'demo', '--json'], {
          ...env,
          PORT: '',
          FRS_PUBLIC_URL: '',
        });
        expect(link.code, link.stderr).to.equal(0);
        expect(JSON.parse(link.stdout).url).to.match(new RegExp(`^http://localhost:${apiPort}/portal/#key=frpl_`));
        next.child.kill('SIGTERM');
        expect(await next.exit, next.stderr()).to.equal(0);
      } finally {
        await stopIfRunning(next);
      }
      // It stopped the cluster it took over: no server of the data directory is left.
      expect(fs.existsSync(path.join(cluster, 'postmaster.pid')), 'postmaster.pid').to.equal(false);
      expect(processesNaming(cluster), 'a server of the data directory').to.deep.equal([]);
      expect(await isFree(port), "the embedded database's port is free").to.equal(true);
    });
  });
});
