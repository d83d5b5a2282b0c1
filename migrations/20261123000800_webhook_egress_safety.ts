import type { Knex } from 'knex';

// Webhook egress safety: a refused destination is recorded as its own error kind, and indexes for the retention
// sweep (finished deliveries, attempts, events, idempotency keys and processed outbox rows by age).
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_error_kind_check;
    ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_error_kind_check
      CHECK (error_kind IN ('timeout', 'connection', 'redirect', 'status', 'blocked_destination'));
    CREATE INDEX deliveries_finished ON deliveries (finished_at) WHERE status IN ('accepted', 'failed');
    CREATE INDEX delivery_attempts_started ON delivery_attempts (started_at);
    CREATE INDEX events_created ON events (created_at);
    CREATE INDEX test_idempotency_keys_created ON test_idempotency_keys (created_at);
    CREATE INDEX outbox_processed ON outbox (processed_at) WHERE processed_at IS NOT NULL;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX IF EXISTS outbox_processed, test_idempotency_keys_created, events_created, delivery_attempts_started, deliveries_finished;
    DELETE FROM delivery_attempts WHERE error_kind = 'blocked_destination';
    ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_error_kind_check;
    ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_error_kind_check
      CHECK (error_kind IN ('timeout', 'connection', 'redirect', 'status'));
  `);
}
