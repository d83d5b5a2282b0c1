import type { Knex } from 'knex';
import type { Logger } from 'pino';
import type { ServiceMetrics } from '../observability/metrics.js';
import { OutageLog } from '../db/outage.js';
import { UPKEEP_FOLD_INTERVAL_MS, foldUpkeep, upkeepDelaySeconds } from '../db/upkeep.js';
import { runDerivedSweep } from './calendar.js';

/**
 * The worker's tick for direct writers' changes (src/db/upkeep.ts): applies the queue to the running totals, then
 * derives the events of the changes (a direct writer's commit notifies nobody: this tick is its wake-up), one tick at a
 * time. `workspaceIds` limits it to those workspaces (a test's own); the worker's covers every workspace.
 */
export function startUpkeepLoop(
  db: Knex,
  options: { logger: Logger; metrics?: ServiceMetrics; workspaceIds?: string[]; intervalMs?: number },
): { stop(): Promise<void> } {
  const { logger, metrics } = options;
  const workspaceIds = options.workspaceIds ?? null;
  const outage = new OutageLog(logger.child({ component: 'upkeep' }), 'upkeep fold');
  const intervalMs = options.intervalMs ?? UPKEEP_FOLD_INTERVAL_MS;
  let running: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  // A tick every intervalMs from the start of the last one; one that overran is followed at once (a fixed timer
  // would skip a whole interval after it, and the figures would lag twice as far behind a busy queue).
  const tick = () => {
    const started = Date.now();
    running = (async () => {
      try {
        // (each awaited on its own line: `metrics?.x.inc(await f())` would skip f when there are no metrics)
        // an idle queue costs one look-up a tick, not a fold statement per queue
        const applied = (await upkeepDelaySeconds(db)) > 0 ? await foldUpkeep(db, workspaceIds) : 0;
        // (only the workspaces with recorded changes: a sweep of every workspace each tick would grow with the tenants)
        const { rows } = await db.raw(
          `SELECT coalesce(array_agg(DISTINCT workspace_id::text), '{}') AS ids FROM entity_changes WHERE ?::uuid[] IS NULL OR workspace_id = ANY (?::uuid[])`,
          [
            workspaceIds === null ? null : `{${workspaceIds.join(',')}}`,
            workspaceIds === null ? null : `{${workspaceIds.join(',')}}`,
          ],
        );
        const changed = rows[0].ids as string[];
        const events = changed.length === 0 ? 0 : await runDerivedSweep(db, new Date(), changed, { folded: true });
        metrics?.upkeepApplied.inc(applied);
        metrics?.calendarEvents.inc(events);
        outage.succeeded();
      } catch (err) {
        outage.failed(err);
      }
      // the delay whatever became of the fold: a fold that keeps failing shows as a growing delay
      const delay = await upkeepDelaySeconds(db).catch(() => undefined);
      if (delay !== undefined) metrics?.upkeepDelay.set(delay);
    })().finally(() => {
      running = undefined;
      if (!stopped) timer = setTimeout(tick, Math.max(0, intervalMs - (Date.now() - started)));
    });
  };
  timer = setTimeout(tick, intervalMs);
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
