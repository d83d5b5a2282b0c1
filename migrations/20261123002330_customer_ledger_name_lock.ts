import type { Knex } from 'knex';

// A customer's first invoice creates its ledger row, whose name the insert trigger copies from the customer. The
// invoice's foreign key takes only FOR KEY SHARE on the customer, which a rename (FOR NO KEY UPDATE) does not wait
// for: a rename not yet committed would then update no ledger row, and the new row would keep the old name for good.
// The insert trigger now locks the customers FOR SHARE, which waits for such a rename and then reads its name (each
// statement of the function sees what committed before it); a rename that comes later waits for the invoice and
// then finds the ledger row.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION customer_ledger_names() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      PERFORM 1 FROM customers c WHERE c.id IN (SELECT customer_id FROM new_rows) ORDER BY c.id FOR SHARE OF c;
      UPDATE customer_ledger l SET name = c.name
      FROM new_rows n JOIN customers c ON c.id = n.customer_id
      WHERE l.customer_id = n.customer_id AND l.name IS DISTINCT FROM c.name;
      RETURN NULL;
    END $fn$;`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION customer_ledger_names() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
      UPDATE customer_ledger l SET name = c.name
      FROM new_rows n JOIN customers c ON c.id = n.customer_id
      WHERE l.customer_id = n.customer_id AND l.name IS DISTINCT FROM c.name;
      RETURN NULL;
    END $fn$;`);
}
