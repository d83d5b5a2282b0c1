import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root, whether running from src/ under tsx or from dist/src after a build. */
export const ROOT_DIR = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const up = path.resolve(here, '..');
  return path.basename(up) === 'dist' ? path.resolve(up, '..') : up;
})();

/** The package's version (package.json), as `fleet-admin --version` prints it. */
export const SERVICE_VERSION: string = JSON.parse(fs.readFileSync(path.join(ROOT_DIR, 'package.json'), 'utf8')).version;

export const DATA_DIR = process.env.FRS_DATA_DIR ?? path.join(ROOT_DIR, '.data');

/** A setting that cannot work as given: reported on one line, with what to change, and never a stack trace. */
export class ConfigError extends Error {}

/**
 * DATABASE_URL when it is set, checked to be a PostgreSQL URL (pg would otherwise read a malformed one as
 * "connect to 127.0.0.1:5432"); undefined for the embedded database. The URL itself is never echoed: it may hold a
 * password.
 */
export function databaseUrlFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const value = env.DATABASE_URL;
  if (!value) return undefined;
  if (!isPostgresUrl(value)) {
    throw new ConfigError('DATABASE_URL is not a PostgreSQL URL: expected postgres://USER:PASSWORD@HOST:PORT/DATABASE (unset it to use the embedded database)');
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
  { min, max, unit, zero }: { min: number; max: number; unit?: string; zero?: string },
  env: NodeJS.ProcessEnv = process.env,
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || value < min || value > max) {
    throw new ConfigError(`${name} must be a whole number${unit ? ` of ${unit}` : ''} from ${min}${min === 0 && zero ? ` (${zero})` : ''} to ${max}, got "${raw}"`);
  }
  return value;
}

/** A switch that loosens or changes behaviour: `1` on, `0` or unset off; anything else is refused, naming it. */
export function envSwitch(name: string, env: NodeJS.ProcessEnv = process.env): boolean | undefined {
  const value = env[name] ?? '';
  if (!['', '0', '1'].includes(value)) throw new ConfigError(`${name} must be 1 or 0, got "${value}"`);
  return value === '' ? undefined : value === '1';
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

export function readConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const port = Number(env.PORT ?? 3000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new ConfigError(`PORT must be an integer from 0 to 65535, got "${env.PORT}"`);
  const adminPort = Number(env.FRS_ADMIN_PORT ?? 3001);
  if (!/^\d+$/.test(env.FRS_ADMIN_PORT ?? '3001') || adminPort > 65535) {
    throw new ConfigError(`FRS_ADMIN_PORT must be an integer from 0 (off) to 65535, got "${env.FRS_ADMIN_PORT}"`);
  }
  const metricsPort = Number(env.FRS_METRICS_PORT ?? 9464);
  if (!Number.isInteger(metricsPort) || metricsPort < 0 || metricsPort > 65535) {
    throw new ConfigError(`FRS_METRICS_PORT must be an integer from 0 (off) to 65535, got "${env.FRS_METRICS_PORT}"`);
  }
  const role = (env.FRS_ROLE ?? 'all') as ServiceConfig['role'];
  if (!['all', 'api', 'worker'].includes(role)) throw new ConfigError(`FRS_ROLE must be all, api or worker, got "${env.FRS_ROLE}"`);
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
