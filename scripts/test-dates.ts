// npm run test:dates: the whole suite at clocks spread from two years back to two years on, then in two other file
// orders, to show that no test depends on the date, the hour, the order of the files or what other tests left behind.
//
// The clock of every process of a run (mocha, the CLI and servers it spawns, the embedded PostgreSQL) is moved by
// Debian's faketime in its relative form (`faketime -f +SECONDS`): every process keeps the same moved clock, where the
// absolute form would restart each new process's clock at the instant given. Each run gets a fresh data folder, so
// its test cluster starts under the moved clock too.
//
// Under a clock moved forward, PostgreSQL's own timers (lock_timeout, statement_timeout, deadlock_timeout) never fire
// while a backend waits: libfaketime hands the real clock to whatever runs inside its epoll_wait, the server's SIGALRM
// handler included, which then finds its time-out not yet due. A test shows that a transaction waits with
// waitsForLock (test/support/database.ts), never with a server time-out.
//
//   npm run test:dates                      every date, then reverse order, then a random order
//   npm run test:dates -- test/rollups.test.ts test/webhooks --grep TLS
//                                           only these test files or folders; other arguments go to mocha
//   FRS_TEST_DATES=2027-02-28T19:59:00Z,... these instants instead
//   FRS_TEST_ORDER_SEED=42                  repeat a random order
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stopEmbeddedPostgres } from '../src/db/embedded.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Today moved by whole years, at this hour: the edges of the window, wherever today is. */
function yearsFromNow(years: number): string {
  const at = new Date();
  at.setUTCFullYear(at.getUTCFullYear() + years);
  return at.toISOString();
}

/** UTC instants; Asia/Dubai is UTC+4 all year, so 20:00Z is its midnight; Europe's summer time is from March to October. */
const DATES = (
  process.env.FRS_TEST_DATES?.split(',') ?? [
    yearsFromNow(-2), // two years back: dates before the day any fixture was made
    '2024-12-31T19:30:00Z', // year end, 23:30 in Dubai: the hour before local midnight
    '2025-02-28T20:30:00Z', // 00:30 on 1 March in Dubai (no 29 February in 2025), still the 28th in UTC
    '2025-06-30T20:00:00Z', // a quarter end at Dubai midnight exactly
    '2025-09-30T23:30:00Z', // a month end late in UTC, already 1 October in Dubai
    '2026-03-31T12:00:00Z', // a month end
    '2026-06-30T20:10:00Z', // summer time in Europe: a workspace on Europe/London shows BST, not GMT (00:10 on 1 July in Dubai)
    '2026-07-31T20:15:00Z', // 00:15 on 1 August in Dubai
    '2026-12-31T19:30:00Z', // year end, 23:30 in Dubai: the hour before local midnight
    '2026-12-31T20:30:00Z', // 00:30 on 1 January in Dubai, still the 31st in UTC: the hour after
    '2027-01-31T12:00:00Z', // a month end
    '2027-02-28T19:59:00Z', // 28 February, crossing Dubai midnight into March while the suite runs
    '2027-03-15T06:00:00Z',
    '2027-04-30T23:30:00Z', // a month end late in UTC, already 1 May in Dubai
    '2027-05-20T10:00:00Z',
    '2027-06-30T19:45:00Z', // a quarter end, 23:45 in Dubai
    '2027-07-31T20:15:00Z', // 00:15 on 1 August in Dubai
    '2027-09-30T16:00:00Z',
    '2027-10-31T20:00:00Z', // Dubai midnight exactly
    '2027-11-15T09:00:00Z',
    '2027-12-31T23:30:00Z', // the UTC year end, already 2028 in Dubai
    '2028-02-29T12:00:00Z', // 29 February
    '2028-06-30T20:30:00Z', // 00:30 on 1 July in Dubai, a quarter end in UTC
    yearsFromNow(2), // two years on
  ]
).map((d) => new Date(d));

/**
 * The command line: arguments naming a test file or folder choose those files (all of them when none does); every
 * other argument goes to mocha as it is (--grep TEXT, --bail).
 */
const ARGS = process.argv.slice(2);
const CHOSEN = ARGS.filter((a) => fs.existsSync(path.resolve(ROOT, a))).map((a) =>
  path.relative(ROOT, path.resolve(ROOT, a)),
);
const MOCHA_ARGS = ARGS.filter((a) => !fs.existsSync(path.resolve(ROOT, a)));

function testFiles(): string[] {
  return (fs.readdirSync(path.join(ROOT, 'test'), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => path.join('test', f))
    .filter((f) => CHOSEN.length === 0 || CHOSEN.some((c) => f === c || f.startsWith(`${c}${path.sep}`)))
    .sort();
}

/** A small seeded generator (mulberry32), so a random order can be repeated. */
function shuffled<T>(items: T[], seed: number): T[] {
  let a = seed >>> 0;
  const random = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

let interrupted = false;

interface RunResult {
  passing: number;
  failing: number;
  seconds: number;
  log: string;
  code: number | null;
}

/** One whole-suite run: mocha over `files` in that order, under `faketime -f +offset` when an offset is given. */
async function run(files: string[], offsetSeconds: number | undefined, logFile: string): Promise<RunResult> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-test-dates-'));
  fs.chmodSync(dataDir, 0o755); // as root the cluster runs as the postgres user
  const mocha = [path.join(ROOT, 'node_modules', '.bin', 'mocha'), ...MOCHA_ARGS, ...files];
  const [command, ...args] =
    offsetSeconds === undefined
      ? mocha
      : ['faketime', '-f', `${offsetSeconds >= 0 ? '+' : ''}${offsetSeconds}`, ...mocha];
  const started = Date.now();
  const out = fs.openSync(logFile, 'w');
  const child = spawn(command, args, {
    cwd: ROOT,
    stdio: ['ignore', out, out],
    env: { ...process.env, FRS_DATA_DIR: dataDir },
  });
  // Ctrl-C ends the run: mocha first, then (below) the test cluster it may have left running.
  const interrupt = () => {
    interrupted = true;
    child.kill('SIGINT');
  };
  process.once('SIGINT', interrupt).once('SIGTERM', interrupt);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  process.off('SIGINT', interrupt).off('SIGTERM', interrupt);
  fs.closeSync(out);
  await stopEmbeddedPostgres(path.join(dataDir, 'test-postgres'));
  fs.rmSync(dataDir, { recursive: true, force: true });
  const log = fs.readFileSync(logFile, 'utf8');
  const count = (word: string) => Number(log.match(new RegExp(`^ +(\\d+) ${word}`, 'm'))?.[1] ?? 0);
  return { passing: count('passing'), failing: count('failing'), seconds: (Date.now() - started) / 1000, log, code };
}

const dubai = (d: Date) =>
  d.toLocaleString('en-GB', { timeZone: 'Asia/Dubai', dateStyle: 'medium', timeStyle: 'short' });

async function main(): Promise<number> {
  if (spawnSync('faketime', ['-f', '+0', 'true']).status !== 0) {
    process.stderr.write('test:dates needs faketime on the PATH: apt-get install faketime\n');
    return 2;
  }
  const files = testFiles();
  if (files.length === 0) {
    process.stderr.write(`test:dates: no test file under ${CHOSEN.join(', ')}\n`);
    return 2;
  }
  const seed = Number(process.env.FRS_TEST_ORDER_SEED ?? Math.floor(Math.random() * 1e9));
  const logs = fs.mkdtempSync(path.join(os.tmpdir(), 'frs-test-dates-logs-'));
  const plan: Array<{ label: string; files: string[]; at?: Date }> = [
    ...DATES.map((at) => ({ label: `${at.toISOString()} (Dubai ${dubai(at)})`, files, at })),
    { label: 'today, test files in reverse order', files: [...files].reverse() },
    { label: `today, test files in random order (FRS_TEST_ORDER_SEED=${seed})`, files: shuffled(files, seed) },
  ];
  process.stdout.write(
    `test:dates: ${plan.length} runs of ${files.length} test files; node ${process.version}, ${os.cpus().length} CPUs; logs in ${logs}\n`,
  );
  let failed = 0;
  for (const [i, step] of plan.entries()) {
    const offset = step.at ? Math.round((step.at.getTime() - Date.now()) / 1000) : undefined;
    const result = await run(step.files, offset, path.join(logs, `run-${String(i + 1).padStart(2, '0')}.log`));
    const ok = result.code === 0 && result.failing === 0 && result.passing > 0;
    if (!ok) failed += 1;
    process.stdout.write(
      `${ok ? 'ok  ' : 'FAIL'} ${step.label}: ${result.passing} passing, ${result.failing} failing (${result.seconds.toFixed(0)} s)\n`,
    );
    if (!ok) process.stdout.write(`${result.log.slice(result.log.search(/^ +\d+ passing/m))}\n`);
    if (interrupted) break;
  }
  process.stdout.write(`test:dates: ${plan.length - failed} of ${plan.length} runs green\n`);
  return failed === 0 ? 0 : 1;
}

process.exit(await main());
