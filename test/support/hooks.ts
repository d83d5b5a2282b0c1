import { closeTestDatabase } from './database.js';

// The tests' receivers listen on 127.0.0.1, a private destination: allow those for the whole run (and the CLI
// processes it starts). The destination-policy tests pass the strict policy explicitly.
process.env.FRS_ALLOW_PRIVATE_WEBHOOK_URLS = '1';

export const mochaHooks = {
  async afterAll() {
    await closeTestDatabase();
  },
};
