import { closeTestDatabase } from './database.js';

export const mochaHooks = {
  async afterAll() {
    await closeTestDatabase();
  },
};
