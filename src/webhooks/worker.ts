import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { Dispatcher } from './dispatcher.js';
import { runCalendarSweep, type CalendarSweepOptions } from './calendar.js';
import type { ServiceMetrics } from '../observability/metrics.js';
import { runRetention } from './retention.js';
import { processConfig, WORKER_CONCURRENCY, type WorkerSettings } from '../config.js';
import { OutageLog } from '../db/outage.js';
import { ChangeListener } from './change-listener.js';
import { startUpkeepLoop } from './upkeep-loop.js';

export const CALENDAR_INTERVAL_MS = 60_000;
/** How often the append-only running totals are folded (migration 20261128000610). */
export const ROLLUP_FOLD_INTERVAL_MS = 1000;
/** How often old delivery records are deleted (see retention.ts). */
export const RETENTION_INTERVAL_MS = 10 * 60_000;

export interface Worker {
  /** Stops the calendar loop, lets a sweep in progress and the attempts in flight finish. */
  stop(): Promise<void>;
}

/**
 * One calendar sweep as the worker runs it: timed, counted in the metrics, logged; failures logged, not thrown (a
 * database outage once when it starts and once when it ends, with `outage`). A sweep missed in an outage is made up
 * by the next: after downtime the latest milestone reached is sent.
 */
export async function observedCalendarSweep(
  db: Knex,
  logger: Logger,
  metrics: ServiceMetrics | undefined,
  now: Date,
  options: CalendarSweepOptions = {},
  outage = new OutageLog(logger.child({ component: 'calendar' }), 'calendar sweep'),
): Promise<void> {
  const started = Date.now();
  try {
    const { events } = await runCalendarSweep(db, now, options);
    outage.succeeded();
    metrics?.calendarSweepDuration.observe((Date.now() - started) / 1000);
    metrics?.calendarEvents.inc(events);
    logger.info({ component: 'calendar', events, ms: Date.now() - started }, 'calendar sweep');
  } catch (err) {
    outage.failed(err);
  }
}

export type { WorkerSettings };

/**
 * The background half of the service: the delivery sweep (continuous), the calendar sweep (every minute), the
 * derived events of each commit that records changes (at once, change-listener.ts), the fold of the append-only
 * running totals (every second) and retention (at start, then every 10 minutes).
 */
export async function startWorker(
  db: Knex,
  logger: Logger,
  metrics?: ServiceMetrics,
  settings: WorkerSettings = processConfig().worker,
): Promise<Worker> {
  const { retentionDays } = settings;
  const dispatcher = new Dispatcher({
    db,
    logger,
    metrics,
    concurrency: WORKER_CONCURRENCY,
    perWorkspaceConcurrency: settings.perWorkspaceConcurrency,
    destinationPolicy: settings.destinationPolicy,
  });
  await dispatcher.start();
  // derived events as soon as a commit records the changes they come from
  const changes = new ChangeListener(db, logger, (events) => metrics?.calendarEvents.inc(events));
  await changes.start();
  let running: Promise<void> = Promise.resolve();
  const calendarOutage = new OutageLog(logger.child({ component: 'calendar' }), 'calendar sweep');
  const sweep = () => {
    running = running.then(() => observedCalendarSweep(db, logger, metrics, new Date(), {}, calendarOutage));
  };
  sweep();
  const timer = setInterval(sweep, CALENDAR_INTERVAL_MS);
  // The fold of the append-only running totals: off the writers' path, one process at a time (the function skips
  // while another holds its lock). The figures are exact without it; it keeps what a summary sums to a few rows.
  let folding: Promise<void> = Promise.resolve();
  const foldOutage = new OutageLog(logger.child({ component: 'rollups' }), 'rollup fold');
  const fold = () => {
    folding = folding.then(async () => {
      const started = Date.now();
      try {
        await db.raw('SELECT rollups_compact()');
        const { rows } = await db.raw('SELECT rollups_pending() AS pending');
        metrics?.rollupPendingRows.set(Number(rows[0].pending));
        metrics?.rollupFoldDuration.observe((Date.now() - started) / 1000);
        foldOutage.succeeded();
      } catch (err) {
        foldOutage.failed(err);
      }
    });
  };
  const foldTimer = setInterval(fold, ROLLUP_FOLD_INTERVAL_MS);
  // The queued changes of direct writers, applied to the running totals (src/db/upkeep.ts): the figures' delay.
  const upkeep = startUpkeepLoop(db, { logger, metrics });
  let retaining: Promise<void> = Promise.resolve();
  const retentionOutage = new OutageLog(logger.child({ component: 'retention' }), 'retention');
  const retain = () => {
    retaining = retaining.then(async () => {
      const started = Date.now();
      try {
        const deleted = await runRetention(db, { now: new Date(), retentionDays });
        retentionOutage.succeeded();
        logger.info({ component: 'retention', retentionDays, deleted, ms: Date.now() - started }, 'retention');
      } catch (err) {
        retentionOutage.failed(err);
      }
    });
  };
  retain();
  const retentionTimer = setInterval(retain, RETENTION_INTERVAL_MS);
  return {
    async stop() {
      clearInterval(timer);
      clearInterval(retentionTimer);
      clearInterval(foldTimer);
      await folding;
      await upkeep.stop();
      await retaining;
      await running;
      await changes.stop();
      await dispatcher.stop();
    },
  };
}
