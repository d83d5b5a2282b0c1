import type { Knex } from 'knex';

// The settings screen's chart of an endpoint's attempts by outcome over 24 hours or 7 days (the admin API's
// getEndpointAttemptStats, src/queries/deliveries.ts endpointAttemptCounts) reads this index's range for the endpoint
// instead of every attempt of the period. Built CONCURRENTLY, outside a transaction, as 20261125000900 is.
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    'CREATE INDEX CONCURRENTLY IF NOT EXISTS delivery_attempts_endpoint_started ON delivery_attempts (endpoint_id, started_at)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS delivery_attempts_endpoint_started');
}
