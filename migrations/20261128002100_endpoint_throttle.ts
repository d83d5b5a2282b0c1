import type { Knex } from 'knex';

// A receiver that answers 429, 502, 503 or 504 asks the sender to slow down: until `throttled_until` (on the sweep's
// clock) nothing is sent to the endpoint, so its backlog takes no dispatcher slot. `throttle_streak` counts such
// answers in a row, for the delay that grows while they continue when no Retry-After says how long (a success or
// another answer resets it). Both written by the dispatcher's record stage (src/webhooks/attempt-records.ts).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_endpoints
      ADD COLUMN throttled_until timestamptz,
      ADD COLUMN throttle_streak integer NOT NULL DEFAULT 0
        CONSTRAINT webhook_endpoints_throttle_streak_not_negative CHECK (throttle_streak >= 0);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE webhook_endpoints DROP COLUMN throttled_until, DROP COLUMN throttle_streak');
}
