import { closeTestDatabase } from './database.js';

// The tests' receivers listen on 127.0.0.1, a private destination: allow those for the whole run (and the CLI
// processes it starts). The destination-policy tests pass the strict policy explicitly.
process.env.FRS_ALLOW_PRIVATE_WEBHOOK_URLS = '1';

// The tests' master key for sealing signing secrets (src/secrets.ts), so that no run writes a key file into the
// checkout's .data/ (child processes, such as the CLI's, inherit it). A developer's own FRS_SECRET_KEY wins.
process.env.FRS_SECRET_KEY ??= 'bWFzdGVyIGtleSBvZiB0aGUgdGVzdCBydW5zIG9ubHk=';

export const mochaHooks = {
  async afterAll() {
    await closeTestDatabase();
  },
};
