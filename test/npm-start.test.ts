import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

// `npm start` as a person runs it: on the embedded database, in a data folder and on ports of its own, stopped by a
// signal to npm's own PID. It must stop the service and its embedded PostgreSQL, leaving both ports free and no
// postmaster.pid, with exit status 0 and no warning.
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** A port the system just handed out and took back: free now, and not another test's fixed port. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    }).on('error', reject);
  });
}

/** True when nothing listens on the port. */
function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(port, '127.0.0.1', () => server.close(() => resolve(true))).on('error', () => resolve(false));
  });
}

interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

async function npmStart(env: NodeJS.ProcessEnv, readyLine: RegExp | null): Promise<Started> {
  const { DATABASE_URL: _unused, ...inherited } = process.env;
  const child = spawn('npm', ['start'], { cwd: ROOT, env: { ...inherited, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => { stdout += chunk; });
  child.stderr!.on('data', (chunk) => { stderr += chunk; });
  const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  if (readyLine) {
    const deadline = Date.now() + 45_000;
    while (!readyLine.test(stdout)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`npm start did not get ready:\n${stdout}\n${stderr}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { child, stdout: () => stdout, stderr: () => stderr, exit };
}

describe('npm start', function () {
  this.timeout(120_000);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-npm-start-'));
  // As root the embedded cluster runs as the postgres user, who must be able to enter the folder.
  fs.chmodSync(dataDir, 0o755);
  after(() => fs.rmSync(dataDir, { recursive: true, force: true }));

  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`stops the service and its embedded database on ${signal} to npm's PID, exit status 0`, async () => {
      const [port, pgPort, metricsPort] = [await freePort(), await freePort(), await freePort()];
      const run = await npmStart(
        { PORT: String(port), HOST: '127.0.0.1', FRS_EMBEDDED_PORT: String(pgPort), FRS_METRICS_PORT: String(metricsPort), FRS_DATA_DIR: dataDir },
        /Ready .* after launch/,
      );
      // It answers, and said what it did while starting.
      const answer = await fetch(`http://127.0.0.1:${port}/openapi.json`);
      expect(answer.status).to.equal(200);
      expect(run.stderr()).to.match(/opening the embedded PostgreSQL .* and applying migrations: done/);
      expect(run.stderr()).to.match(/loading the API .*: done/);

      const sent = Date.now();
      run.child.kill(signal);
      expect(await run.exit, `npm's exit status\n${run.stderr()}`).to.equal(0);
      expect(Date.now() - sent, 'stopped within 10 s').to.be.below(10_000);
      expect(await isFree(port), 'the API port is free').to.equal(true);
      expect(await isFree(pgPort), "the embedded database's port is free").to.equal(true);
      expect(await isFree(metricsPort), 'the metrics port is free').to.equal(true);
      expect(fs.existsSync(path.join(dataDir, 'postgres', 'postmaster.pid')), 'no postmaster.pid').to.equal(false);
      const logs = run.stdout().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line));
      expect(logs.filter((l) => l.level >= 40), 'no warning or error').to.deep.equal([]);
      expect(logs.map((l) => l.msg)).to.include.members(['shutting down', 'stopped']);
    });
  }

  it('refuses a DATABASE_URL that is not a URL in one line, exit status 1', async () => {
    const run = await npmStart({ DATABASE_URL: 'localhost/fleet', PORT: String(await freePort()), FRS_METRICS_PORT: '0' }, null);
    expect(await run.exit).to.equal(1);
    expect(run.stderr().split('\n').filter((line) => line.startsWith('fleet-rental'))).to.deep.equal([
      'fleet-rental: failed to start: DATABASE_URL is not a PostgreSQL URL: expected postgres://USER:PASSWORD@HOST:PORT/DATABASE (unset it to use the embedded database)',
    ]);
  });
});
