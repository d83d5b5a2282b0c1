import type { Knex } from 'knex';

// A throttle per endpoint (issue 34): `rate_limit` deliveries a second (1 to 1,000; null: none), set by the admin API,
// the CLI and the settings screen. The dispatcher keeps a token bucket on the row, so that every worker process shares
// it: `rate_tokens` (what the bucket held at `rate_refilled_at`; null: full). The claim statement refills it, takes a
// token per delivery it leases and writes it back under the row's lock (src/webhooks/rate-limits.ts).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_endpoints
      ADD COLUMN rate_limit integer
        CONSTRAINT webhook_endpoints_rate_limit_range CHECK (rate_limit BETWEEN 1 AND 1000),
      ADD COLUMN rate_tokens double precision,
      ADD COLUMN rate_refilled_at timestamptz;
    -- every claim looks for the throttled endpoints with due deliveries
    CREATE INDEX webhook_endpoints_rate_limited ON webhook_endpoints (id) WHERE rate_limit IS NOT NULL AND deleted_at IS NULL;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX webhook_endpoints_rate_limited;
    ALTER TABLE webhook_endpoints DROP COLUMN rate_limit, DROP COLUMN rate_tokens, DROP COLUMN rate_refilled_at;
  `);
}
