import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { Dispatcher } from './dispatcher.js';
import { runCalendarSweep } from './calendar.js';

export const CALENDAR_INTERVAL_MS = 60_000;

export interface Worker {
  /** Stops the calendar loop, lets a sweep in progress and the attempts in flight finish. */
  stop(): Promise<void>;
}

/** The background half of the service: the delivery sweep (continuous) and the calendar sweep (every minute). */
export async function startWorker(db: Knex, logger: Logger): Promise<Worker> {
  const dispatcher = new Dispatcher({ db, logger: logger.child({ component: 'dispatcher' }) });
  await dispatcher.start();
  let running: Promise<void> = Promise.resolve();
  const sweep = () => {
    running = running.then(async () => {
      const started = Date.now();
      try {
        const { events } = await runCalendarSweep(db, new Date());
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
