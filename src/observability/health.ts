import type { Knex } from 'knex';
import { pendingMigrations } from '../db/migrate.js';

// Liveness and readiness, one definition for every listener that serves them: the API (GET /healthz, /readyz,
// documented operations) and the metrics listener (the only HTTP a worker-only process has).

/** How long the database may take to answer a readiness check. */
export const READINESS_TIMEOUT_MS = 2000;

export type Readiness = { ready: true } | { ready: false; check: 'database' | 'schema'; message: string };

/** Ready when the database answers within the time-out and has every migration this code knows. */
export async function readiness(db: Knex, timeoutMs = READINESS_TIMEOUT_MS): Promise<Readiness> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    const answered = await Promise.race([db.raw('SELECT 1').then(() => 'ok' as const, () => 'error' as const), timeout]);
    if (answered !== 'ok') return { ready: false, check: 'database', message: answered === 'timeout' ? `The database did not answer within ${timeoutMs} ms.` : 'The database does not answer.' };
    const pending = await Promise.race([pendingMigrations(db).catch(() => null), timeout]);
    if (pending === 'timeout' || pending === null) return { ready: false, check: 'database', message: 'The database did not answer in time.' };
    if (pending.length > 0) {
      return { ready: false, check: 'schema', message: `The database schema lacks ${pending.length} migration(s); run "fleet-admin migrate".` };
    }
    return { ready: true };
  } finally {
    clearTimeout(timer);
  }
}
