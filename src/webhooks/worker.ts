import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { Dispatcher } from './dispatcher.js';
import { runCalendarSweep } from './calendar.js';
import type { ServiceMetrics } from '../observability/metrics.js';

export const CALENDAR_INTERVAL_MS = 60_000;

export interface Worker {
  /** Stops the calendar loop, lets a sweep in progress and the attempts in flight finish. */
  stop(): Promise<void>;
}

/** The background half of the service: the delivery sweep (continuous) and the calendar sweep (every minute). */
export async function startWorker(db: Knex, logger: Logger, metrics?: ServiceMetrics): Promise<Worker> {
  const dispatcher = new Dispatcher({ db, logger, metrics });
  await dispatcher.start();
  let running: Promise<void> = Promise.resolve();
  const sweep = () => {
    running = running.then(async () => {
      const started = Date.now();
      try {
        const { events } = await runCalendarSweep(db, new Date());
        metrics?.calendarSweepDuration.observe((Date.now() - started) / 1000);
        metrics?.calendarEvents.inc(events);
        logger.info({ component: 'calendar', events, ms: Date.now() - started }, 'calendar sweep');
      } catch (err) {
        logger.error({ component: 'calendar', err }, 'calendar sweep failed');
      }
    });
  };
  sweep();
  const timer = setInterval(sweep, CALENDAR_INTERVAL_MS);
  return {
    async stop() {
      clearInterval(timer);
      await running;
      await dispatcher.stop();
    },
  };
}
