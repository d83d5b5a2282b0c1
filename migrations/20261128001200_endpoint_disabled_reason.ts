import type { Knex } from 'knex';

// Why an endpoint was switched off, shown wherever the switch-off time is: `failures` (20 failed attempts in a row),
// `gone` (the receiver answered 410 Gone: it wants no more deliveries) or `manual` (an operator, the admin API or the
// settings screen). Set exactly while the endpoint is off. Endpoints already off are given the reason their failure
// streak shows: one switched off by the dispatcher reached 20 and kept it, one switched off by hand may not have.
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE webhook_endpoints ADD COLUMN disabled_reason text
      CONSTRAINT webhook_endpoints_disabled_reason_known CHECK (disabled_reason IN ('failures', 'gone', 'manual'));
    UPDATE webhook_endpoints SET disabled_reason = CASE WHEN consecutive_failures >= 20 THEN 'failures' ELSE 'manual' END
      WHERE NOT is_active;
    ALTER TABLE webhook_endpoints ADD CONSTRAINT webhook_endpoints_disabled_reason_while_off
      CHECK ((disabled_reason IS NULL) = is_active);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE webhook_endpoints DROP COLUMN disabled_reason');
}
