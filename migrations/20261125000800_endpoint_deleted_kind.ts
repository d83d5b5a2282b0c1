import type { Knex } from 'knex';

// Deleting a webhook endpoint (the admin API's deleteEndpoint, `fleet-admin endpoint delete`). Frozen SQL, imports
// nothing from src/.
// - webhook_endpoints.deleted_at: a deleted endpoint is kept (soft delete), so its delivery log stays readable until
//   retention removes it, but it is hidden from every list, never sent to and never fanned out to again.
// - deliveries.error_kind: how a delivery was ended without an attempt of its own; `endpoint_deleted` for the pending
//   deliveries its endpoint's deletion marked failed. (An attempt's kind stays in delivery_attempts.error_kind.)
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_endpoints ADD COLUMN deleted_at timestamptz;
    ALTER TABLE deliveries ADD COLUMN error_kind text CONSTRAINT deliveries_error_kind_check CHECK (error_kind IN ('endpoint_deleted'));
  `);
}

// Back: the deleted endpoints go with their deliveries (the schema before this one has no way to hide them).
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DELETE FROM webhook_endpoints WHERE deleted_at IS NOT NULL;
    ALTER TABLE deliveries DROP COLUMN error_kind;
    ALTER TABLE webhook_endpoints DROP COLUMN deleted_at;
  `);
}
