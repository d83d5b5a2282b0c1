// How long `npm start` takes to be ready: the service (src/main.ts, the default FRS_ROLE=all) started RUNS times
// (default 5; `npx tsx bench/start.ts 7`) on the embedded database in a data folder of the bench's own (made, and its
// cluster initialised, by one start before the measured ones), each stopped with SIGTERM once it prints "Ready".
// Prints each start's time to "Ready" (its own figure: seconds since the process was launched) and the median.
// FRS_DATA_DIR names a data folder to use instead (kept; no first start). Ports: FRS_EMBEDDED_PORT (default 54390), PORT (54391), FRS_ADMIN_PORT (54392), FRS_METRICS_PORT (54393).
// Under the hood the time is the document and its validators, the modules' loading and the database's opening; a
// busy machine is simulated by running a CPU-bound process beside it (for example `node -e 'for(;;);'`).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const runs = Number(process.argv[2] ?? 5);
// FRS_DATA_DIR given: that folder's cluster, kept, with no first start (to time one start as a whole process: `... 1`)
const given = process.env.FRS_DATA_DIR;
const dataDir = given ?? fs.mkdtempSync(path.join(os.tmpdir(), 'frs-bench-start-'));
// (as root the cluster runs as the postgres user, who must be able to enter the folder)
if (!given) fs.chmodSync(dataDir, 0o755);
const env: NodeJS.ProcessEnv = {
  ...process.env,
  FRS_DATA_DIR: dataDir,
  FRS_EMBEDDED_PORT: process.env.FRS_EMBEDDED_PORT ?? '54390',
  PORT: process.env.PORT ?? '54391',
  FRS_ADMIN_PORT: process.env.FRS_ADMIN_PORT ?? '54392',
  FRS_METRICS_PORT: process.env.FRS_METRICS_PORT ?? '54393',
  LOG_LEVEL: 'warn',
};
delete env.DATABASE_URL;

/** One start: its "Ready N s after launch" figure, once it has stopped again. */
async function start(): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (chunk) => {
    err += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const ready = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const seconds = /Ready (\d+\.\d) s after launch/.exec(out)?.[1];
      if (seconds) resolve(Number(seconds));
    });
    void exited.then((code) => reject(new Error(`the service exited (${code}) before it was ready:\n${err}`)));
  });
  child.kill('SIGTERM');
  const code = await exited;
  if (code !== 0) throw new Error(`the service stopped with status ${code}:\n${err}`);
  return ready;
}

try {
  if (!given) process.stdout.write(`first start (initialises the cluster, loads the demo): ${await start()} s\n`);
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    times.push(await start());
    process.stdout.write(`start ${i + 1}: ready after ${times.at(-1)} s\n`);
  }
  const sorted = [...times].sort((a, b) => a - b);
  process.stdout.write(
    `ready after: median ${sorted[Math.floor(sorted.length / 2)]} s, min ${sorted[0]} s, max ${sorted.at(-1)} s (${runs} starts, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)})\n`,
  );
} finally {
  if (!given) fs.rmSync(dataDir, { recursive: true, force: true });
}
