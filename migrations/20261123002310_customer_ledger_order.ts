import type { Knex } from 'knex';

// Receivables in their order (outstanding, highest first, then name, then id) from one index, read without visiting
// the ledger or the customers: the ledger carries the customer's name, and customer_ledger_order holds the order
// and the figures of a row. Before, each row of the page (and each row a search skipped) cost a look-up of the
// customer for its name, and the customers who owe nothing were read from a second, name-ordered branch.
//   customer_ledger.name  the customer's name, backfilled; set for new ledger rows and kept on a rename by
//                         statement-level triggers (a row is created by the invoice rollup, which is left as it is)
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE customer_ledger ADD COLUMN name text;
    UPDATE customer_ledger l SET name = c.name FROM customers c WHERE c.id = l.customer_id;

    CREATE FUNCTION customer_ledger_names() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      UPDATE customer_ledger l SET name = c.name
      FROM new_rows n JOIN customers c ON c.id = n.customer_id
      WHERE l.customer_id = n.customer_id AND l.name IS DISTINCT FROM c.name;
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER customer_ledger_names AFTER INSERT ON customer_ledger REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION customer_ledger_names();

    CREATE FUNCTION customers_ledger_names() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      UPDATE customer_ledger l SET name = n.name
      FROM new_rows n
      WHERE l.customer_id = n.id AND l.name IS DISTINCT FROM n.name;
      RETURN NULL;
    END $fn$;
    CREATE TRIGGER customers_ledger_names AFTER UPDATE ON customers REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION customers_ledger_names();

    CREATE INDEX customer_ledger_order ON customer_ledger (workspace_id, outstanding DESC, name, customer_id)
      INCLUDE (billed, collected, open_invoices) WHERE invoices > 0;
    DROP INDEX customer_ledger_outstanding;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE INDEX customer_ledger_outstanding ON customer_ledger (workspace_id, outstanding DESC) WHERE invoices > 0;
    DROP INDEX customer_ledger_order;
    DROP TRIGGER customers_ledger_names ON customers; DROP FUNCTION customers_ledger_names();
    DROP TRIGGER customer_ledger_names ON customer_ledger; DROP FUNCTION customer_ledger_names();
    ALTER TABLE customer_ledger DROP COLUMN name;`);
}
