import type { Knex } from 'knex';
import type { OperationsItem, OperationsToday } from '../../generated/strict/types.gen.js';
import { baseBindings, DAY_END, DAY_START, jsonArrayText, jsonObjectText, jsonText, jsonValue, type WorkspaceRef } from './common.js';

export type { OperationsItem, OperationsToday };

/** A timestamptz as Date.prototype.toISOString() writes it: UTC, milliseconds, `Z`. */
const isoTime = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * Today's handovers (confirmed/active/completed bookings picked up today) and returns (active/completed bookings
 * due back today), today being the workspace's local date. Reads the pickup/dropoff indexes for today's range
 * only; balanceDue is the booking's running open balance (bookings.balance_due).
 */
export async function operationsToday(db: Knex, workspace: WorkspaceRef, now: Date): Promise<OperationsToday> {
  return JSON.parse(await operationsTodayJson(db, workspace, now)) as OperationsToday;
}

// Built as JSON text in SQL and handed over as is: a busy day has hundreds of items, and the API sends the text, so
// Node neither parses them nor serialises them again. Written by concatenation (jsonObjectText), about half the
// database CPU of json_build_object/json_agg here. Customer and vehicle are looked up per returned booking. The text
// is the same for every request, so it is built once.
const items = (column: string, statuses: string) => `
    SELECT ${jsonArrayText(
      jsonObjectText([
        ['bookingId', jsonValue.plainString('b.id')],
        ['customer', jsonObjectText([
          ['id', jsonValue.plainString('b.customer_id')],
          ['name', `(SELECT ${jsonValue.string('c.name')} FROM customers c WHERE c.id = b.customer_id AND c.workspace_id = :ws)`],
        ])],
        ['vehicle', jsonObjectText([
          ['id', jsonValue.plainString('b.vehicle_id')],
          ['plate', `(SELECT ${jsonValue.string('v.plate')} FROM vehicles v WHERE v.id = b.vehicle_id AND v.workspace_id = :ws)`],
        ])],
        ['time', jsonValue.plainString(isoTime(`b.${column}`))],
        ['amount', jsonValue.number('b.amount')],
        ['balanceDue', jsonValue.number('b.balance_due')],
      ]),
      `b.${column}, b.id`,
    )}
    FROM bookings b
    WHERE b.workspace_id = :ws AND b.status IN (${statuses})
      AND b.${column} >= ${DAY_START} AND b.${column} < ${DAY_END}`;
const OPERATIONS_TODAY = `SELECT ${jsonObjectText([
  ['handovers', `(${items('pickup_at', `'confirmed', 'active', 'completed'`)})`],
  ['returns', `(${items('dropoff_at', `'active', 'completed'`)})`],
])} AS body`;

/** The same answer as operationsToday(), as the JSON text of the document's OperationsToday: what the API sends. */
export async function operationsTodayJson(db: Knex, workspace: WorkspaceRef, now: Date): Promise<string> {
  return jsonText(db, OPERATIONS_TODAY, baseBindings(workspace, now), { prepared: true });
}
