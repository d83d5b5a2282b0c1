import type { Knex } from 'knex';

// The admin API's delivery log of a whole workspace (listDeliveries: newest first, keyset on created_at and id,
// src/queries/deliveries.ts workspaceDeliveryLog) reads this index in its order and stops at the page, instead of
// sorting every delivery of the workspace (the endpoint logs have deliveries_endpoint). Built CONCURRENTLY, outside a
// transaction, so deploying it blocks neither the dispatcher's writes nor the API's reads; IF NOT EXISTS lets it run
// again after a failed build (drop the INVALID index first).
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw(
    'CREATE INDEX CONCURRENTLY IF NOT EXISTS deliveries_workspace_created ON deliveries (workspace_id, created_at DESC, id DESC)',
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS deliveries_workspace_created');
}
