// Shared by migrations only, and frozen: applied migrations have created and dropped triggers with this very text, so
// it is never changed in a way that changes what they did (a new kind of trigger is a new helper). Migrations import
// nothing from src/: what they mean must not change when the product's code does.

// The three statement-level triggers (insert, update, delete) through which a rollup function sees the rows a
// statement changed as transition tables `new_rows` / `old_rows` (see rollup_changes() in the rollups migration).

export function createRollupTriggers(table: string, fn: string): string {
  return `
    CREATE TRIGGER ${fn}_insert AFTER INSERT ON ${table} REFERENCING NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION ${fn}();
    CREATE TRIGGER ${fn}_update AFTER UPDATE ON ${table} REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
      FOR EACH STATEMENT EXECUTE FUNCTION ${fn}();
    CREATE TRIGGER ${fn}_delete AFTER DELETE ON ${table} REFERENCING OLD TABLE AS old_rows
      FOR EACH STATEMENT EXECUTE FUNCTION ${fn}();`;
}

export function dropRollupTriggers(table: string, fn: string): string {
  return `
    DROP TRIGGER IF EXISTS ${fn}_insert ON ${table};
    DROP TRIGGER IF EXISTS ${fn}_update ON ${table};
    DROP TRIGGER IF EXISTS ${fn}_delete ON ${table};`;
}
