import type { Knex } from 'knex';

// Receivables: a customer's open invoices straight from a partial index (the ageing of a page of customers),
// and trigram search on customer names, so a selective search does not scan every customer.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX invoices_customer_open ON invoices (customer_id) INCLUDE (due_date, balance) WHERE balance > 0;
    CREATE INDEX customers_name_trgm ON customers USING gin (name gin_trgm_ops);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX IF EXISTS customers_name_trgm; DROP INDEX IF EXISTS invoices_customer_open;');
}
