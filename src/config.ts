import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root, whether running from src/ under tsx or from dist/src after a build. */
export const ROOT_DIR = (() => {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const up = path.resolve(here, '..');
  return path.basename(up) === 'dist' ? path.resolve(up, '..') : up;
})();

export const DATA_DIR = process.env.FRS_DATA_DIR ?? path.join(ROOT_DIR, '.data');

export interface ServiceConfig {
  databaseUrl: string | undefined;
  port: number;
  host: string;
  logLevel: string;
  /** What this process runs: the API and the webhook worker (`all`, the default), or one of them. */
  role: 'all' | 'api' | 'worker';
}

export function readConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const port = Number(env.PORT ?? 3000);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be an integer from 0 to 65535, got "${env.PORT}"`);
  const role = (env.FRS_ROLE ?? 'all') as ServiceConfig['role'];
  if (!['all', 'api', 'worker'].includes(role)) throw new Error(`FRS_ROLE must be all, api or worker, got "${env.FRS_ROLE}"`);
  return {
    role,
    databaseUrl: env.DATABASE_URL || undefined,
    port,
    host: env.HOST ?? '0.0.0.0',
    logLevel: env.LOG_LEVEL ?? 'info',
  };
}
