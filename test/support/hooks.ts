import { closeTestDatabase } from './database.js';
import { reconfigure, TEST_SETTINGS } from './config.js';

// This process's code runs with the tests' configuration (test/support/config.ts), built as an object.
reconfigure({});
// The child processes the tests start (the CLI's, the service's) inherit the same settings.
Object.assign(process.env, TEST_SETTINGS);

// Ctrl-C (mocha's parent process passes on SIGINT, then SIGTERM) would end the run before the root afterAll: close as
// it would, so that an interrupted run leaves no cluster behind, then end as the signal would have.
const interrupted = (signal: NodeJS.Signals) => {
  for (const s of ['SIGINT', 'SIGTERM'] as const) process.removeAllListeners(s).on(s, () => undefined);
  void closeTestDatabase()
    .catch(() => undefined)
    .finally(() => {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    });
};
process.once('SIGINT', interrupted).once('SIGTERM', interrupted);

export const mochaHooks = {
  async afterAll() {
    await closeTestDatabase();
  },
};
