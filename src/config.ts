import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The service's configuration, read in one place. loadConfig() is the only reader of the process's environment in
// src/ (test/structure.test.ts holds it so): it is called once by each process's entry (src/main.ts, the CLI) and
// hands out a Config, whose sections are passed down. SETTINGS lists every variable once, with its default, its range
// and the processes that read it; the same list drives the validation of whole numbers below and the table of the
// operators' guide, docs/operations.md (test/config.test.ts holds the table against it). Each section is parsed on first use, so a process
// validates what it reads (src/main.ts reads its sections at start, so a bad value stops it there, on one line).
// This file imports nothing of src/ but the name resolver's parser: every other file may import it.

/** Repository root, whether running from src/ under tsx or from dist/src after a build. */
export const ROOT_DIR = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const up = path.resolve(here, '..');
  return path.basename(up) === 'dist' ? path.resolve(up, '..') : up;
})();

/** The package's version (package.json), as `fleet-admin --version` prints it. */
export const SERVICE_VERSION: string = JSON.parse(fs.readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')).version;

/** A setting that cannot work as given: reported on one line, with what to change, and never a stack trace. */
export class ConfigError extends Error {}

/** An environment: variable names and their values, as a process is given them. */
export type Env = Readonly<Record<string, string | undefined>>;

/** Which processes read a setting: the API's (`npm start` with FRS_ROLE api or all), the worker's, the CLI (`fleet-admin`). */
export type Reader = 'api' | 'worker' | 'cli';

/** The bounds of a whole-number setting, as its refusal names them (`zero`: what 0 means, where 0 switches it off). */
export interface WholeNumberRange {
  min: number;
  max: number;
  unit?: string;
  zero?: string;
}

export interface Setting {
  name: string;
  /** As the operators' guide shows it (a whole number's: its fallback). */
  default?: string;
  /** What it may be, as the operators' guide shows it (a whole number's: its bounds). */
  range?: string;
  readers: Reader[];
  meaning: string;
  /** A whole number: its value when unset, and the bounds it is validated against. */
  whole?: { fallback: number } & WholeNumberRange;
}

const ALL: Reader[] = ['api', 'worker', 'cli'];
const SERVICE: Reader[] = ['api', 'worker'];
const PORT_RANGE = '0 to 65535';
const LIMIT = { min: 0, max: 1_000_000, zero: 'off' };
const CAP = { min: 0, max: 1_000_000, zero: 'no cap' };

/** Every variable the service reads, once. */
export const SETTINGS: readonly Setting[] = [
  {
    name: 'DATABASE_URL',
    default: 'unset',
    range: 'a `postgres://` URL',
    readers: ALL,
    meaning:
      'A PostgreSQL 14+ connection string (`postgres://USER:PASSWORD@HOST:PORT/DATABASE`). Unset: the embedded cluster under `.data/postgres`, shared by the server and `fleet-admin`; whichever starts first starts it.',
  },
  {
    name: 'FRS_DATA_DIR',
    default: '`.data` in the checkout',
    range: 'a folder',
    readers: ALL,
    meaning:
      "The data folder: the embedded clusters (`postgres/`, the service's, and `test-postgres/`, the tests') with their password files, and the key files `secret.key` and `api-secret.key` (unless `FRS_SECRET_KEY_FILE` or `FRS_API_SECRET_FILE` say otherwise).",
  },
  {
    name: 'FRS_EMBEDDED_PORT',
    default: '`54329`',
    range: PORT_RANGE,
    readers: ALL,
    meaning: "Port of the service's embedded cluster (listening on 127.0.0.1 only).",
  },
  {
    name: 'PORT',
    default: '`3000`',
    range: PORT_RANGE,
    readers: ['api', 'cli'],
    meaning: "Listening port of the API (and the base of `FRS_PUBLIC_URL`'s default).",
  },
  { name: 'HOST', default: '`0.0.0.0`', range: 'an address', readers: ['api'], meaning: 'Listening address.' },
  {
    name: 'LOG_LEVEL',
    default: '`info`',
    range: 'a pino level',
    readers: SERVICE,
    meaning:
      'pino log level. Logs are JSON lines on stdout with ISO 8601 `time`; they never contain keys, secrets, the Authorization header or payload bodies. `debug` adds a line per accepted delivery.',
  },
  {
    name: 'FRS_ROLE',
    default: '`all`',
    range: '`all`, `api`, `worker`',
    readers: SERVICE,
    meaning:
      '`all`: the API and the webhook worker, the worker in a process of its own (the only one given the master key; see "Secrets and keys"); `api`: the API alone (refuses a master key in its environment); `worker`: the delivery and calendar sweeps alone.',
  },
  {
    name: 'FRS_METRICS_PORT',
    default: '`9464`',
    range: `${PORT_RANGE} (0 off)`,
    readers: SERVICE,
    meaning:
      "Port of the Prometheus metrics listener (`/metrics`, plus `/healthz` and `/readyz`), separate from the API's. `0` switches it off.",
  },
  {
    name: 'FRS_METRICS_HOST',
    default: '`127.0.0.1`',
    range: 'an address',
    readers: SERVICE,
    meaning: 'Address of the metrics listener. Only this machine can scrape it unless you set, say, `0.0.0.0`.',
  },
  {
    name: 'FRS_ADMIN_PORT',
    default: '`3001`',
    range: `${PORT_RANGE} (0 off)`,
    readers: ['api'],
    meaning: 'Port of the admin API (`/admin/v1`, see docs/platform.md), a listener of its own. `0` switches it off.',
  },
  {
    name: 'FRS_ADMIN_HOST',
    default: '`127.0.0.1`',
    range: 'an address',
    readers: ['api'],
    meaning: "Address of the admin API's listener. Only this machine reaches it unless you set another.",
  },
  {
    name: 'FRS_SEED_DEMO',
    default: 'unset',
    range: '`1` or `0`',
    readers: SERVICE,
    meaning:
      "`1`: load the demo workspace at start when there is no workspace `demo`; `0`: never, not even on the embedded database's first start.",
  },
  {
    name: 'FRS_ALLOW_PRIVATE_WEBHOOK_URLS',
    default: 'unset (off)',
    range: '`1` or `0`',
    readers: ALL,
    meaning:
      '`1` lets webhooks reach private, loopback and link-local addresses: for a receiver on your own machine. Off, they are refused (see docs/webhooks.md).',
  },
  {
    name: 'FRS_WEBHOOK_ALLOWED_CIDRS',
    default: 'unset',
    range: 'CIDR ranges, comma-separated',
    readers: ALL,
    meaning:
      "Ranges (`10.1.0.0/16,fd12:3456::/32`) allowed although private, for **every** workspace's endpoints; every other private range stays refused. To open a range to one customer only, set that workspace's `webhookAllowedCidrs` instead (see Destinations in docs/webhooks.md).",
  },
  {
    name: 'FRS_WEBHOOK_DNS_SERVERS',
    default: 'unset (the servers of `/etc/resolv.conf`)',
    range: 'addresses with optional ports, comma-separated',
    readers: ALL,
    meaning: 'DNS servers (`192.0.2.53,127.0.0.1:5353,[2001:db8::53]:53`) that webhook destination names are asked of.',
  },
  {
    name: 'FRS_WEBHOOK_PROXY',
    default: 'unset (deliveries connect directly)',
    range: 'an `http://` or `https://` proxy URL',
    readers: ['worker', 'cli'],
    meaning:
      'An HTTP CONNECT proxy (`http://HOST:PORT`, or `http://USER:PASSWORD@HOST:PORT`) every webhook delivery is sent through, for receivers that admit known addresses only. The service still refuses private destinations by the URL\'s name first, but the proxy makes the real connection: it must refuse private addresses itself (see "An egress proxy" below).',
  },
  {
    name: 'FRS_WEBHOOK_WORKSPACE_CONCURRENCY',
    default: '`16`',
    range: '1 to 64',
    readers: ['worker'],
    meaning:
      "Attempts one workspace may have in flight in a worker (the worker runs 64 at once), so one customer's slow endpoints cannot take every slot.",
  },
  {
    name: 'FRS_RETENTION_DAYS',
    readers: ['worker'],
    meaning: 'Days the delivery records are kept; see docs/webhooks.md.',
    whole: { fallback: 30, min: 1, max: 3650, unit: 'days' },
  },
  {
    name: 'FRS_SECRET_KEY',
    default: 'unset',
    range: 'base64 of 32 bytes',
    readers: ['worker', 'cli'],
    meaning:
      "The master key, which opens webhook signing secrets (they are sealed to its public key): base64 of 32 random bytes (`openssl rand -base64 32`). Given to the worker and to `fleet-admin` only; `FRS_ROLE=api` refuses it, `FRS_ROLE=all` hands it to its worker's process. Unset: the key file. Set it whenever more than one machine runs the worker or `fleet-admin`.",
  },
  {
    name: 'FRS_SECRET_KEY_FILE',
    default: '`secret.key` in the data folder',
    range: 'a file',
    readers: ['worker', 'cli'],
    meaning:
      "The master key file, read when `FRS_SECRET_KEY` is unset: one base64 key a line, mode 0600 (a file its group or other users can read is refused, naming `chmod 600`). Only the embedded default creates it by itself (on the worker's first start); with `DATABASE_URL`, `fleet-admin secrets create-master-key` does.",
  },
  {
    name: 'FRS_SECRET_KEY_PREVIOUS',
    default: 'unset',
    range: 'base64 keys, comma-separated',
    readers: ['worker', 'cli'],
    meaning: 'During a master-key rotation only: the old key(s).',
  },
  {
    name: 'FRS_API_SECRET',
    default: 'unset',
    range: 'base64 of 32 bytes',
    readers: ['api'],
    meaning:
      "The API process's own secret: the keys of its list cursors, of the settings screen's CSRF tokens and of the admin API's stored answers are derived from it; it opens no signing secret. Base64 of 32 random bytes, the same on every API process. Unset: its key file.",
  },
  {
    name: 'FRS_API_SECRET_FILE',
    default: '`api-secret.key` in the data folder',
    range: 'a file',
    readers: ['api'],
    meaning:
      "The API secret's key file (mode 0600), read when `FRS_API_SECRET` is unset; only the embedded default creates it by itself. With `DATABASE_URL` an API process without one refuses to start, naming both settings.",
  },
  {
    name: 'FRS_API_SECRET_PREVIOUS',
    default: 'unset',
    range: 'base64 keys, comma-separated',
    readers: ['api'],
    meaning:
      'While changing the API secret: the old one(s) (cursors, CSRF tokens and stored answers made under it still hold).',
  },
  {
    name: 'FRS_API_RATE_LIMIT',
    readers: ['api'],
    meaning: 'Requests a second per workspace (all its keys), per API process. See "A fair share" in docs/api.md.',
    whole: { fallback: 100, ...LIMIT },
  },
  {
    name: 'FRS_API_CONCURRENCY',
    readers: ['api'],
    meaning: 'Requests in flight per workspace, per API process.',
    whole: { fallback: 8, ...LIMIT },
  },
  {
    name: 'FRS_API_AUTH_FAILURE_LIMIT',
    readers: ['api'],
    meaning:
      'Failed authentications a minute per client address before its requests get 429 without a database look-up.',
    whole: { fallback: 30, ...LIMIT },
  },
  {
    name: 'FRS_TRUSTED_PROXY_CIDRS',
    default: 'unset',
    range: 'CIDR ranges, comma-separated',
    readers: ['api'],
    meaning: 'Ranges of proxies whose `X-Forwarded-For` names the client (unset: it is ignored).',
  },
  {
    name: 'FRS_DB_ROLES',
    default: '`on`',
    range: '`on` or `off`',
    readers: ALL,
    meaning:
      "`off` runs the API and the worker with the connecting user's rights instead of their own database roles (for a PostgreSQL where those roles cannot be had; see below).",
  },
  {
    name: 'FRS_MAX_CONNECTIONS_PER_ADDRESS',
    readers: ['api'],
    meaning:
      'Open connections one client address (IPv6: its /64) may hold at one API process (set `0` behind a proxy, whose address every client shares).',
    whole: { fallback: 64, ...CAP },
  },
  {
    name: 'FRS_MAX_CONNECTIONS',
    readers: ['api'],
    meaning:
      'Open connections one API process keeps. Beyond it Node closes a new connection as soon as it is accepted, unanswered. The HTTP time-outs are fixed: 10 s for a request\'s headers, 15 s for the whole request, 5 s for an idle keep-alive connection (see "What one client can hold" in docs/api.md).',
    whole: { fallback: 1024, ...CAP },
  },
  {
    name: 'FRS_SHED_EVENT_LOOP_LAG_MS',
    readers: ['api'],
    meaning:
      'Event-loop lag (ms) past which the API answers new requests 503 `overloaded` with `Retry-After: 1` (the health probes excepted).',
    whole: { fallback: 200, min: 0, max: 60_000, unit: 'milliseconds', zero: 'off' },
  },
  {
    name: 'FRS_ANSWER_CACHE_MB',
    readers: ['api'],
    meaning:
      'Megabytes of answers an API process keeps by their `ETag`, so a repeat of the same request (any key of the workspace) is served after one look-up of the data version (see Revalidation in docs/api.md).',
    whole: { fallback: 64, min: 0, max: 65_536, zero: 'off' },
  },
  {
    name: 'DATABASE_READ_URL',
    default: 'unset',
    range: '`postgres://` URLs, comma-separated',
    readers: ['api'],
    meaning:
      'Read replicas of `DATABASE_URL` (streaming standbys): the read API\'s GETs go to one within `FRS_READ_MAX_LAG_MS`, else to the primary. See "Past one database: read replicas".',
  },
  // 60000: the primary's samples kept (src/db/read-routing.ts, MAX_SAMPLES × PROBE_INTERVAL_MS)
  {
    name: 'FRS_READ_MAX_LAG_MS',
    readers: ['api'],
    meaning:
      "How old a replica's data may be (ms) for it to answer reads; past it, or unreachable, it is skipped until it is back within.",
    whole: { fallback: 5000, min: 100, max: 60_000, unit: 'milliseconds' },
  },
  {
    name: 'FRS_API_STATEMENT_TIMEOUT_MS',
    readers: ALL,
    meaning:
      "How long one database statement of the API may run (ms) before it is cut short and its request answered 503 `unavailable` with `Retry-After` (see docs/api.md). The worker's statements have no limit.",
    whole: { fallback: 3000, min: 100, max: 60_000, unit: 'milliseconds' },
  },
  {
    name: 'FRS_PUBLIC_URL',
    default: '`http://localhost:$PORT`',
    range: 'an http(s) origin',
    readers: ['api', 'cli'],
    meaning:
      "The public listener's address as the staff's browsers reach it (no path): the base of the settings screen's links; `https` makes its cookie `__Host-frs_portal` (`Secure`). Plain `http` is refused for any host but this machine's (`localhost`, `127.0.0.1`, `[::1]`) unless `FRS_ALLOW_HTTP_PUBLIC_URL=1`. See \"Settings screen\" in docs/platform.md.",
  },
  {
    name: 'FRS_ALLOW_HTTP_PUBLIC_URL',
    default: 'unset (off)',
    range: '`1` or `0`',
    readers: ['api', 'cli'],
    meaning:
      "`1` accepts an `http` `FRS_PUBLIC_URL` for another host than this machine (a network you trust end to end): the screen's links and cookie then cross it in clear.",
  },
  {
    name: 'FRS_PORTAL_AUTH_FAILURE_LIMIT',
    readers: ['api', 'cli'],
    meaning:
      "Failed settings-screen link openings and unknown session cookies a minute per client address before its screen requests get 429 without a database look-up. A budget of its own, apart from `FRS_API_AUTH_FAILURE_LIMIT`'s.",
    whole: { fallback: 30, ...LIMIT },
  },
  {
    name: 'FRS_PORTAL_FRAME_ANCESTORS',
    default: 'unset (none)',
    range: 'origins, space- or comma-separated',
    readers: ['api', 'cli'],
    meaning:
      'Origins allowed to show the settings screen in an iframe (`https://app.example.com`; `*.` allowed in a host). Unset: no site may frame it. Set, its cookie becomes `SameSite=None; Secure; Partitioned`.',
  },
  {
    name: 'USER',
    default: "the OS user's name",
    range: 'a name',
    readers: ['cli'],
    meaning: "Who the CLI's audit entries name when the OS has no name for its user id (as in some containers).",
  },
  {
    name: 'FRS_WORKER_OF_PARENT',
    default: 'unset',
    range: '`1`',
    readers: ['worker'],
    meaning:
      'Set by `FRS_ROLE=all` on the worker process it starts (with an IPC channel), never by hand: that worker reports to its parent and serves nothing.',
  },
];

/** Settings of the tests, the benchmarks and the date runs only (test/, bench/, scripts/): the service reads none. */
export const TEST_SETTINGS: ReadonlyArray<{ name: string; default: string; meaning: string }> = [
  {
    name: 'FRS_TEST_PG_PORT',
    default: '`54339`',
    meaning:
      "Port of the tests' embedded cluster; a run moves to the next free port (up to +9) when another checkout's cluster holds it.",
  },
  {
    name: 'FRS_TEST_REPLICA_PG_PORT',
    default: '`FRS_TEST_PG_PORT` + 1',
    meaning: "Port of the replica tests' primary; their standby takes the next one (`test/db/replicas.test.ts`).",
  },
  {
    name: 'FRS_CHROMIUM',
    default: '`/usr/bin/chromium`',
    meaning: 'The browser the documentation and settings-screen tests drive.',
  },
  {
    name: 'FRS_FIGURES_SEED',
    default: '`20261128`',
    meaning: 'Seed of the random workspace `test/figures-exact.test.ts` checks every figure against.',
  },
  {
    name: 'FRS_TEST_DATES',
    default: 'the dates in `scripts/test-dates.ts`',
    meaning: 'Comma-separated instants `npm run test:dates` runs the suite at.',
  },
  { name: 'FRS_TEST_ORDER_SEED', default: 'random', meaning: 'Seed of the test order of `npm run test:dates`.' },
  { name: 'FRS_BENCH_PG_PORT', default: 'per benchmark', meaning: "Port of a benchmark's embedded cluster." },
  {
    name: 'FRS_BENCH_PG_DIR',
    default: '`.data/large-pg`',
    meaning: 'The cluster `bench/standby.ts` makes a standby of.',
  },
  {
    name: 'FRS_BENCH_STANDBY_DIR',
    default: '`.data/large-pg-standby`',
    meaning: 'Where `bench/standby.ts` keeps its standby.',
  },
  { name: 'FRS_BENCH_STANDBY_PORT', default: '`54480`', meaning: "Port of `bench/standby.ts`'s standby." },
];

const READERS: Record<Reader, string> = { api: 'api', worker: 'worker', cli: 'CLI' };

/** A setting's row of the operators' guide's table (docs/operations.md): variable, default, range, read by, meaning. */
export function settingRow(s: Setting): string[] {
  const byAll = ALL.every((reader) => s.readers.includes(reader));
  return [
    `\`${s.name}\``,
    s.whole ? `\`${s.whole.fallback}\`` : s.default!,
    s.whole
      ? `${s.whole.min}${s.whole.min === 0 && s.whole.zero ? ` (${s.whole.zero})` : ''} to ${s.whole.max}`
      : s.range!,
    byAll ? 'all' : s.readers.map((reader) => READERS[reader]).join(', '),
    s.meaning,
  ];
}

/** A setting of SETTINGS by name. */
export function setting(name: string): Setting {
  const found = SETTINGS.find((s) => s.name === name);
  if (!found) throw new Error(`${name} is not in SETTINGS (src/config.ts)`);
  return found;
}

/** The value of a whole-number setting of SETTINGS when unset. */
export function wholeNumberDefault(name: string): number {
  const { whole } = setting(name);
  if (!whole) throw new Error(`${name} is not a whole-number setting`);
  return whole.fallback;
}

// ---------------------------------------------------------------------------------------------------------------
// Parsers of one setting or one group of them: pure functions of the environment they are given.

/**
 * DATABASE_URL when it is set, checked to be a PostgreSQL URL (pg would otherwise read a malformed one as
 * "connect to 127.0.0.1:5432"); undefined for the embedded database. The URL itself is never echoed: it may hold a
 * password.
 */
export function databaseUrlFromEnv(env: Env): string | undefined {
  const value = env.DATABASE_URL;
  if (!value) return undefined;
  if (!isPostgresUrl(value)) {
    throw new ConfigError(
      'DATABASE_URL is not a PostgreSQL URL: expected postgres://USER:PASSWORD@HOST:PORT/DATABASE (unset it to use the embedded database)',
    );
  }
  return value;
}

/** Whether `value` is a postgres:// (or postgresql://) URL naming a host. */
export function isPostgresUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return ['postgres:', 'postgresql:'].includes(url.protocol) && url.hostname !== '';
  } catch {
    return false;
  }
}

/**
 * A whole-number setting within bounds, `fallback` when unset or empty; anything else is refused in one line naming
 * the variable, its unit and its range (`0 (off)` where 0 switches the thing off).
 */
export function wholeNumberSetting(
  name: string,
  fallback: number,
  { min, max, unit, zero }: WholeNumberRange,
  env: Env,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < min || value > max) {
    throw new ConfigError(
      `${name} must be a whole number${unit ? ` of ${unit}` : ''} from ${min}${min === 0 && zero ? ` (${zero})` : ''} to ${max}, got "${raw}"`,
    );
  }
  return value;
}

/** A whole-number setting of SETTINGS, with its fallback and bounds. */
function whole(name: string, env: Env): number {
  const { whole: range } = setting(name);
  if (!range) throw new Error(`${name} is not a whole-number setting`);
  return wholeNumberSetting(name, range.fallback, range, env);
}

/** A switch that loosens or changes behaviour: `1` on, `0` or unset off; anything else is refused, naming it. */
export function envSwitch(name: string, env: Env): boolean | undefined {
  const value = env[name] ?? '';
  if (!['', '0', '1'].includes(value)) throw new ConfigError(`${name} must be 1 or 0, got "${value}"`);
  return value === '' ? undefined : value === '1';
}

/** Whether `cidr` is an IPv4 or IPv6 range in CIDR form (10.1.0.0/16, fd12:3456::/32). */
export function isCidr(cidr: string): boolean {
  const match = /^([^/]+)\/(\d{1,3})$/.exec(cidr);
  const ip = match && net.isIP(match[1]);
  return Boolean(match && ip && Number(match[2]) <= (ip === 4 ? 32 : 128));
}

export interface ServiceConfig {
  databaseUrl: string | undefined;
  port: number;
  host: string;
  logLevel: string;
  /** What this process runs: the API and the webhook worker (`all`, the default), or one of them. */
  role: 'all' | 'api' | 'worker';
  /**
   * This process is the worker an `all` process started (FRS_WORKER_OF_PARENT=1, set by that process only, with an IPC
   * channel): it reports to its parent and serves nothing. A supervisor's own IPC channel (pm2, fork) is not a sign of it.
   */
  workerOfParent: boolean;
  /** The Prometheus metrics listener; port 0 switches it off. */
  metricsPort: number;
  metricsHost: string;
  /** The admin API's listener (src/admin/): FRS_ADMIN_PORT (default 3001; 0 off) on FRS_ADMIN_HOST (default 127.0.0.1). */
  adminPort: number;
  adminHost: string;
}

export function readConfig(env: Env): ServiceConfig {
  const port = Number(env.PORT ?? 3000);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ConfigError(`PORT must be an integer from 0 to 65535, got "${env.PORT}"`);
  const adminPort = Number(env.FRS_ADMIN_PORT ?? 3001);
  if (!/^\d+$/.test(env.FRS_ADMIN_PORT ?? '3001') || adminPort > 65535) {
    throw new ConfigError(`FRS_ADMIN_PORT must be an integer from 0 (off) to 65535, got "${env.FRS_ADMIN_PORT}"`);
  }
  const metricsPort = Number(env.FRS_METRICS_PORT ?? 9464);
  if (!Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65535) {
    throw new ConfigError(`FRS_METRICS_PORT must be an integer from 0 (off) to 65535, got "${env.FRS_METRICS_PORT}"`);
  }
  const role = (env.FRS_ROLE ?? 'all') as ServiceConfig['role'];
  if (!['all', 'api', 'worker'].includes(role))
    throw new ConfigError(`FRS_ROLE must be all, api or worker, got "${env.FRS_ROLE}"`);
  return {
    role,
    workerOfParent: role === 'worker' && env.FRS_WORKER_OF_PARENT === '1',
    databaseUrl: databaseUrlFromEnv(env),
    port,
    host: env.HOST ?? '0.0.0.0',
    logLevel: env.LOG_LEVEL ?? 'info',
    metricsPort,
    metricsHost: env.FRS_METRICS_HOST || '127.0.0.1',
    adminPort,
    adminHost: env.FRS_ADMIN_HOST || '127.0.0.1',
  };
}

/** `FRS_DB_ROLES=off` runs every process as the connecting user (for a database where roles cannot be had). */
export function dbRolesEnabled(env: Env): boolean {
  const value = env.FRS_DB_ROLES ?? 'on';
  if (value !== 'on' && value !== 'off') throw new ConfigError(`FRS_DB_ROLES must be on or off, got "${value}"`);
  return value === 'on';
}

/** How long one statement of the API may run (src/db/database.ts, API_STATEMENT_TIMEOUT_MS). */
export function apiStatementTimeoutMs(env: Env): number {
  return whole('FRS_API_STATEMENT_TIMEOUT_MS', env);
}

/** What one client can hold of the API's HTTP server (src/http/http-limits.ts). */
export interface HttpLimits {
  /** The request's headers must be whole within this time of its first byte (Node: 60 s). */
  headersTimeoutMs: number;
  /** The whole request (headers and any body) must arrive within this time (Node: 300 s). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (Node's default; below the headers time-out). */
  keepAliveTimeoutMs: number;
  /** How often the server looks for requests past those time-outs (Node: every 30 s, which would add up to 30 s). */
  checkIntervalMs: number;
  /** Open connections beyond this are closed by Node as soon as they are accepted (0: no cap). */
  maxConnections: number;
  /**
   * Open connections one client address (an IPv6 client: its /64) may hold (0: no cap), so that one client cannot
   * fill the cap above and keep everyone else out (a refusal held for a second costs it nothing). Behind a proxy
   * every client shares the proxy's address: lift it there (0), and let the proxy limit its clients.
   */
  maxConnectionsPerAddress: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 15_000,
  keepAliveTimeoutMs: 5_000,
  checkIntervalMs: 1_000,
  maxConnections: wholeNumberDefault('FRS_MAX_CONNECTIONS'),
  maxConnectionsPerAddress: wholeNumberDefault('FRS_MAX_CONNECTIONS_PER_ADDRESS'),
};

/** The connection caps from FRS_MAX_CONNECTIONS and FRS_MAX_CONNECTIONS_PER_ADDRESS (0 lifts one); the other limits are fixed. */
export function httpLimitsFromEnv(env: Env): HttpLimits {
  return {
    ...DEFAULT_HTTP_LIMITS,
    maxConnections: whole('FRS_MAX_CONNECTIONS', env),
    maxConnectionsPerAddress: whole('FRS_MAX_CONNECTIONS_PER_ADDRESS', env),
  };
}

/** The shedding threshold from FRS_SHED_EVENT_LOOP_LAG_MS (milliseconds; 0 turns shedding off). */
export function shedLagFromEnv(env: Env): number {
  return whole('FRS_SHED_EVENT_LOOP_LAG_MS', env);
}

/** The answer cache's budget in bytes (FRS_ANSWER_CACHE_MB; 0 off). */
export function answerCacheBytesFromEnv(env: Env): number {
  return whole('FRS_ANSWER_CACHE_MB', env) * 1024 * 1024;
}

export interface WorkspaceLimitSettings {
  /** Requests a second per workspace; 0: no rate limit. */
  ratePerSecond: number;
  /** Requests in flight per workspace; 0: no concurrency limit. */
  concurrency: number;
}

export function workspaceLimitsFromEnv(env: Env): WorkspaceLimitSettings {
  return { ratePerSecond: whole('FRS_API_RATE_LIMIT', env), concurrency: whole('FRS_API_CONCURRENCY', env) };
}

export interface AuthFailureSettings {
  /** Failed authentications a minute per address; 0: no limit. */
  perMinute: number;
  /** Proxies whose X-Forwarded-For names the client (CIDR ranges). */
  trustedProxies: string[];
}

export function authFailureSettingsFromEnv(env: Env): AuthFailureSettings {
  const trustedProxies = (env.FRS_TRUSTED_PROXY_CIDRS ?? '')
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean);
  for (const cidr of trustedProxies) {
    if (!isCidr(cidr))
      throw new ConfigError(
        `FRS_TRUSTED_PROXY_CIDRS must be a comma-separated list of CIDR ranges such as 10.0.0.0/8, got "${cidr}"`,
      );
  }
  return { perMinute: whole('FRS_API_AUTH_FAILURE_LIMIT', env), trustedProxies };
}

/** DATABASE_READ_URL's replicas (one postgres:// URL or several, comma-separated); none when unset. */
export function readUrlsFromEnv(env: Env): string[] {
  const value = env.DATABASE_READ_URL?.trim();
  if (!value) return [];
  const urls = value.split(',').map((url) => url.trim());
  urls.forEach((url, i) => {
    // (the URL is never echoed: it may hold a password)
    if (!isPostgresUrl(url)) {
      throw new ConfigError(
        `DATABASE_READ_URL must be postgres:// URLs separated by commas (postgres://USER:PASSWORD@HOST:PORT/DATABASE); its entry ${i + 1} is not one`,
      );
    }
  });
  return urls;
}

export function readMaxLagMsFromEnv(env: Env): number {
  return whole('FRS_READ_MAX_LAG_MS', env);
}

/** Which destinations webhooks may reach (src/webhooks/destination-policy.ts). */
export interface DestinationPolicy {
  /** Every destination is allowed (FRS_ALLOW_PRIVATE_WEBHOOK_URLS=1). */
  allowPrivate: boolean;
  /** Private ranges allowed all the same (FRS_WEBHOOK_ALLOWED_CIDRS). */
  allowedCidrs: string[];
  /** Where names are resolved: the DNS servers (FRS_WEBHOOK_DNS_SERVERS; default the system's) and the deadline (name-resolution.ts). */
  dns?: { servers?: string[]; deadlineMs?: number };
  /** How names are resolved, instead of the hosts file and DNS: tests pass their own. */
  lookup?: (hostname: string) => Promise<Array<{ address: string; family: number }>>;
  /**
   * The HTTP CONNECT proxy deliveries are sent through (FRS_WEBHOOK_PROXY), if any: the delivery policy's only
   * (deliveryPolicyFromEnv), never registration's, which sends nothing.
   */
  proxy?: string;
}

/** A DNS server as Node's resolver takes it: an IP address, IPv4 with `:port`, or `[IPv6]:port`. */
function isDnsServer(server: string): boolean {
  const port = (text?: string) => text === undefined || (Number(text) >= 1 && Number(text) <= 65535);
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(server);
  if (bracketed) return net.isIPv6(bracketed[1]) && port(bracketed[2]);
  if (net.isIPv6(server)) return true;
  const v4 = /^([^:]+)(?::(\d{1,5}))?$/.exec(server);
  return v4 !== null && net.isIPv4(v4[1]) && port(v4[2]);
}

/** The policy the environment sets; strict unless switched. */
export function destinationPolicyFromEnv(env: Env): DestinationPolicy {
  const allowPrivate = envSwitch('FRS_ALLOW_PRIVATE_WEBHOOK_URLS', env) === true;
  const cidrs = (env.FRS_WEBHOOK_ALLOWED_CIDRS ?? '')
    .split(',')
    .map((c) => c.trim())
    .filter(Boolean)
    .map((cidr) => {
      if (!isCidr(cidr))
        throw new ConfigError(
          `FRS_WEBHOOK_ALLOWED_CIDRS must be a comma-separated list of CIDR ranges such as 10.1.0.0/16, got "${cidr}"`,
        );
      return cidr;
    });
  const servers = (env.FRS_WEBHOOK_DNS_SERVERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (servers.length === 0) return { allowPrivate, allowedCidrs: cidrs };
  if (!servers.every(isDnsServer)) {
    throw new ConfigError(
      `FRS_WEBHOOK_DNS_SERVERS must be a comma-separated list of IP addresses, each with an optional port (192.0.2.53, 127.0.0.1:5353, [2001:db8::53]:53), got "${env.FRS_WEBHOOK_DNS_SERVERS}"`,
    );
  }
  return { allowPrivate, allowedCidrs: cidrs, dns: { servers } };
}

/**
 * FRS_WEBHOOK_PROXY: an http(s) proxy URL with a host and nothing after it but `/` (credentials allowed, sent as
 * Proxy-Authorization); undefined when unset. A refusal never repeats the value, which may hold a password.
 */
export function webhookProxyFromEnv(env: Env): string | undefined {
  const value = env.FRS_WEBHOOK_PROXY?.trim();
  if (!value) return undefined;
  const refuse = (why: string) =>
    new ConfigError(
      `FRS_WEBHOOK_PROXY must be the URL of an HTTP CONNECT proxy, such as http://proxy.internal:3128 (user:password@ allowed): ${why}`,
    );
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw refuse('its value is not a URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw refuse(`its scheme is ${url.protocol} (http: or https: only)`);
  if (!url.hostname) throw refuse('it names no host');
  if (url.pathname !== '/' || url.search || url.hash) throw refuse('it has a path, query or fragment');
  return value;
}

/** The policy deliveries are sent under: the destination policy, and the egress proxy when FRS_WEBHOOK_PROXY sets one. */
export function deliveryPolicyFromEnv(env: Env): DestinationPolicy {
  const policy = destinationPolicyFromEnv(env);
  const proxy = webhookProxyFromEnv(env);
  return proxy ? { ...policy, proxy } : policy;
}

/** Attempts in flight at once in the worker. */
export const WORKER_CONCURRENCY = 64;

/** The operator's per-workspace limit of the worker, if set: a whole number from 1 to `concurrency`. */
export function workspaceConcurrencyFromEnv(concurrency: number, env: Env): number | undefined {
  const n = wholeNumberSetting('FRS_WEBHOOK_WORKSPACE_CONCURRENCY', -1, { min: 1, max: concurrency }, env);
  return n === -1 ? undefined : n;
}

export function retentionDaysFromEnv(env: Env): number {
  return whole('FRS_RETENTION_DAYS', env);
}

/** The worker's settings; a bad value is a ConfigError naming the variable. */
export interface WorkerSettings {
  retentionDays: number;
  perWorkspaceConcurrency: number | undefined;
  /** What deliveries are sent under (deliveryPolicyFromEnv: the destination policy and the egress proxy). */
  destinationPolicy: DestinationPolicy;
}

export function workerSettingsFromEnv(env: Env): WorkerSettings {
  return {
    retentionDays: retentionDaysFromEnv(env),
    perWorkspaceConcurrency: workspaceConcurrencyFromEnv(WORKER_CONCURRENCY, env),
    destinationPolicy: deliveryPolicyFromEnv(env),
  };
}

/** Where the settings screen is reached and who may embed it (src/portal/). */
export interface PortalSettings {
  /** The public listener's base URL as the staff's browsers reach it (scheme, host, port; no path): the links' base. */
  publicUrl: string;
  /** Whether FRS_PUBLIC_URL gave it (else it is this machine's PORT: see src/portal/link-base.ts). */
  publicUrlGiven?: boolean;
  /** Origins allowed to show the screen in a frame (CSP frame-ancestors); none by default. */
  frameAncestors: string[];
  /**
   * The screen's own budget of failed authentications a minute per client address (0: none), apart from the public
   * API's: a key-less API request, which any web page can make a browser send, must not lock staff out of the screen.
   */
  authFailuresPerMinute: number;
}

/** An origin a frame-ancestors list may name: scheme and host (a leading `*.` allowed), an optional port; or 'self'. */
const FRAME_ANCESTOR = /^(?:'self'|https?:\/\/(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::\d{1,5})?)$/i;

export function portalSettingsFromEnv(env: Env): PortalSettings {
  const given = env.FRS_PUBLIC_URL?.trim() || `http://localhost:${env.PORT || 3000}`;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw new ConfigError(
      `FRS_PUBLIC_URL must be the public listener's base URL, such as https://api.example.com, got "${given}"`,
    );
  }
  if (
    !['http:', 'https:'].includes(url.protocol) ||
    url.pathname !== '/' ||
    url.search ||
    url.hash ||
    url.username ||
    url.password
  ) {
    throw new ConfigError(
      `FRS_PUBLIC_URL must be an http(s) origin with no path, query or credentials, such as https://api.example.com, got "${given}"`,
    );
  }
  const frameAncestors = (env.FRS_PORTAL_FRAME_ANCESTORS ?? '').split(/[\s,]+/).filter(Boolean);
  for (const origin of frameAncestors) {
    if (!FRAME_ANCESTOR.test(origin)) {
      throw new ConfigError(
        `FRS_PORTAL_FRAME_ANCESTORS lists the origins that may embed the settings screen, such as https://app.example.com (space- or comma-separated), got "${origin}"`,
      );
    }
  }
  // Over plain http beyond this machine, the screen's session cookie and the links' keys cross the network readable
  // (and the cookie can have no `__Host-` name): refused unless an operator says so, knowingly.
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  const allowHttp = envSwitch('FRS_ALLOW_HTTP_PUBLIC_URL', env) ?? false;
  if (url.protocol === 'http:' && !loopback && !allowHttp) {
    throw new ConfigError(
      `FRS_PUBLIC_URL must be https for an address other than this machine's (the settings screen's cookie and links would cross the network in clear), got "${given}"; set FRS_ALLOW_HTTP_PUBLIC_URL=1 to allow it anyway`,
    );
  }
  // Embedded by another site, the session cookie must be `Secure`, which a browser keeps only from https (or localhost).
  if (frameAncestors.some((origin) => origin !== "'self'") && url.protocol === 'http:' && !loopback) {
    throw new ConfigError(
      `FRS_PORTAL_FRAME_ANCESTORS lets other sites embed the settings screen, whose cookie must then be Secure: set FRS_PUBLIC_URL to the https address browsers reach (got "${given}")`,
    );
  }
  const authFailuresPerMinute = whole('FRS_PORTAL_AUTH_FAILURE_LIMIT', env);
  return {
    publicUrl: url.origin,
    publicUrlGiven: Boolean(env.FRS_PUBLIC_URL?.trim()),
    frameAncestors,
    authFailuresPerMinute,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The configuration of one process.

export interface Config {
  /**
   * The environment it was read from. Only for what is built from it whole: a child process's environment
   * (childProcessEnv) and the key variables src/secrets.ts reads afresh (takeVariables removes them).
   */
  readonly env: Env;
  /** `npm start`'s own settings: role, listeners, log level, DATABASE_URL. */
  readonly service: ServiceConfig;
  readonly databaseUrl: string | undefined;
  readonly dataDir: string;
  readonly embeddedPort: number;
  readonly dbRoles: boolean;
  readonly apiStatementTimeoutMs: number;
  readonly seedDemo: boolean | undefined;
  /** The OS user's name as the environment gives it (USER), for the CLI's audit entries. */
  readonly user: string | undefined;
  readonly httpLimits: HttpLimits;
  readonly shedEventLoopLagMs: number;
  readonly answerCacheBytes: number;
  readonly workspaceLimits: WorkspaceLimitSettings;
  readonly authFailures: AuthFailureSettings;
  readonly readUrls: string[];
  readonly readMaxLagMs: number;
  readonly retentionDays: number;
  readonly destinationPolicy: DestinationPolicy;
  /** What deliveries are sent under: destinationPolicy with the egress proxy (FRS_WEBHOOK_PROXY), if one is set. */
  readonly deliveryPolicy: DestinationPolicy;
  readonly worker: WorkerSettings;
  readonly portal: PortalSettings;
}

/**
 * The configuration `env` gives. Each section is parsed when first read, and kept: a ConfigError names the variable.
 * `env` is kept as given, not copied (src/secrets.ts's key variables are taken out of it).
 */
export function configFrom(env: Env): Config {
  const kept = new Map<string, unknown>();
  const section =
    <T>(name: string, parse: () => T) =>
    () => {
      if (!kept.has(name)) kept.set(name, parse());
      return kept.get(name) as T;
    };
  const getters: { [K in keyof Config]: () => Config[K] } = {
    env: () => env,
    service: section('service', () => readConfig(env)),
    databaseUrl: section('databaseUrl', () => databaseUrlFromEnv(env)),
    dataDir: section('dataDir', () => env.FRS_DATA_DIR ?? path.join(ROOT_DIR, '.data')),
    embeddedPort: section('embeddedPort', () => Number(env.FRS_EMBEDDED_PORT ?? 54329)),
    dbRoles: section('dbRoles', () => dbRolesEnabled(env)),
    apiStatementTimeoutMs: section('apiStatementTimeoutMs', () => apiStatementTimeoutMs(env)),
    seedDemo: section('seedDemo', () => envSwitch('FRS_SEED_DEMO', env)),
    user: () => env.USER,
    httpLimits: section('httpLimits', () => httpLimitsFromEnv(env)),
    shedEventLoopLagMs: section('shedEventLoopLagMs', () => shedLagFromEnv(env)),
    answerCacheBytes: section('answerCacheBytes', () => answerCacheBytesFromEnv(env)),
    workspaceLimits: section('workspaceLimits', () => workspaceLimitsFromEnv(env)),
    authFailures: section('authFailures', () => authFailureSettingsFromEnv(env)),
    readUrls: section('readUrls', () => readUrlsFromEnv(env)),
    readMaxLagMs: section('readMaxLagMs', () => readMaxLagMsFromEnv(env)),
    retentionDays: section('retentionDays', () => retentionDaysFromEnv(env)),
    destinationPolicy: section('destinationPolicy', () => destinationPolicyFromEnv(env)),
    deliveryPolicy: section('deliveryPolicy', () => deliveryPolicyFromEnv(env)),
    worker: section('worker', () => workerSettingsFromEnv(env)),
    portal: section('portal', () => portalSettingsFromEnv(env)),
  };
  const config = {} as Config;
  for (const [name, get] of Object.entries(getters)) Object.defineProperty(config, name, { get, enumerable: true });
  return config;
}

let current: Config | undefined;

/**
 * This process's configuration, from its environment: the one read of process.env in src/. Called by each process's
 * entry before anything else (src/main.ts, the CLI); what it returns is passed down, and is also what
 * processConfig() gives the code that is not handed it.
 */
export function loadConfig(): Config {
  // the environment itself, not a copy: the master key's variables taken out of it (takeVariables) are gone from the process
  current = configFrom(process.env);
  return current;
}

/**
 * The configuration loadConfig() made for this process (made now when no entry did, as for a script of the
 * benchmarks), or the one useConfig() set (tests).
 */
export function processConfig(): Config {
  return current ?? loadConfig();
}

/** Makes `config` this process's configuration, for the code that reads processConfig() (tests); returns the one before. */
export function useConfig(config: Config): Config | undefined {
  const before = current;
  current = config;
  return before;
}

/**
 * Removes `names` from this process's environment (the one its configuration was read from) and returns their
 * values: for src/secrets.ts, so that a process serving the API does not hold the master key (its worker's process is
 * given them instead).
 */
export function takeVariables(names: readonly string[]): Record<string, string> {
  const env = processConfig().env as Record<string, string | undefined>;
  const taken: Record<string, string> = {};
  for (const name of names) {
    if (env[name] !== undefined) taken[name] = env[name]!;
    delete env[name];
  }
  return taken;
}

/** The environment a child process of this one is started with: this process's own (as its configuration read it) and `extra`. */
export function childProcessEnv(extra: Env = {}): NodeJS.ProcessEnv {
  return { ...processConfig().env, ...extra };
}
