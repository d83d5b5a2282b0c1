import type { Knex } from 'knex';

// A throttle per endpoint (issue 34): `rate_limit` deliveries a second (1 to 1,000; null: none), set by the admin API,
// the CLI and the settings screen. The dispatcher keeps a token bucket per throttled endpoint in a table of its own,
// so that every worker process shares it: what the bucket held (`tokens`) at `refilled_at`. The claim statement
// refills it, takes a token per delivery it leases and writes it back under the bucket row's lock
// (src/webhooks/rate-limits.ts). Not on the endpoint's row: fan-out locks that row FOR SHARE, and the attempts'
// bookkeeping and the admin API update it, and a claim must neither wait for those nor skip the endpoint meanwhile.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_endpoints ADD COLUMN rate_limit integer
      CONSTRAINT webhook_endpoints_rate_limit_range CHECK (rate_limit BETWEEN 1 AND 1000);
    -- every claim looks for the throttled endpoints with due deliveries
    CREATE INDEX webhook_endpoints_rate_limited ON webhook_endpoints (id) WHERE rate_limit IS NOT NULL AND deleted_at IS NULL;
    CREATE TABLE webhook_rate_buckets (
      endpoint_id uuid PRIMARY KEY REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      tokens double precision NOT NULL CHECK (tokens >= 0),
      refilled_at timestamptz NOT NULL
    );
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP TABLE webhook_rate_buckets;
    DROP INDEX webhook_endpoints_rate_limited;
    ALTER TABLE webhook_endpoints DROP COLUMN rate_limit;
  `);
}
