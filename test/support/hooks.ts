import { closeTestDatabase } from './database.js';

// The tests' receivers listen on 127.0.0.1, a private destination: allow those for the whole run (and the CLI
// processes it starts). The destination-policy tests pass the strict policy explicitly.
process.env.FRS_ALLOW_PRIVATE_WEBHOOK_URLS = '1';

// The tests' master key for sealing signing secrets (src/secrets.ts), so that no run writes a key file into the
// checkout's .data/ (child processes, such as the CLI's, inherit it). A developer's own FRS_SECRET_KEY wins.
process.env.FRS_SECRET_KEY ??= 'bWFzdGVyIGtleSBvZiB0aGUgdGVzdCBydW5zIG9ubHk=';
// The API process's own secret (cursors, CSRF tokens, the admin API's stored answers), likewise.
process.env.FRS_API_SECRET ??= 'QVBJIHNlY3JldCBvZiB0aGUgdGVzdCBydW5zIG9ubHk=';

// Ctrl-C (mocha's parent process passes on SIGINT, then SIGTERM) would end the run before the root afterAll: close as
// it would, so that an interrupted run leaves no cluster behind, then end as the signal would have.
const interrupted = (signal: NodeJS.Signals) => {
  for (const s of ['SIGINT', 'SIGTERM'] as const) process.removeAllListeners(s).on(s, () => undefined);
  void closeTestDatabase().catch(() => undefined).finally(() => {
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
