import type { Knex } from 'knex';

// A webhook destination name that does not resolve (no such name, a server failure, no answer within the lookup's
// deadline) is recorded as its own error kind, `dns`, rather than as a `connection` failure.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_error_kind_check;
    ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_error_kind_check
      CHECK (error_kind IN ('timeout', 'connection', 'dns', 'redirect', 'status', 'blocked_destination'));
  `);
}

// Back: the attempts recorded as `dns` become `connection` failures, the kind they had before (nothing is deleted).
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_error_kind_check;
    UPDATE delivery_attempts SET error_kind = 'connection' WHERE error_kind = 'dns';
    ALTER TABLE delivery_attempts ADD CONSTRAINT delivery_attempts_error_kind_check
      CHECK (error_kind IN ('timeout', 'connection', 'redirect', 'status', 'blocked_destination'));
  `);
}
