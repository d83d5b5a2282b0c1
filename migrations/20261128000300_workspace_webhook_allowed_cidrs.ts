import type { Knex } from 'knex';

// The private ranges one workspace's webhook endpoints may reach (src/webhooks/destination-policy.ts): opened per
// workspace by an all-workspaces admin token or the CLI, instead of for every tenant by the process-wide list. CIDR
// text, checked by the service before it is written; empty by default (nothing private is reachable). The admin
// API's role reads and changes it; the worker reads it (it reads every workspace column already). Frozen SQL,
// imports nothing from src/.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE workspaces ADD COLUMN webhook_allowed_cidrs text[] NOT NULL DEFAULT '{}'`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE workspaces DROP COLUMN webhook_allowed_cidrs');
}
