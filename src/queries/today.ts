import type { Knex } from 'knex';
import type { OperationsItem, OperationsToday } from '../../generated/strict/types.gen.js';
import {
  baseBindings,
  DAY_END,
  DAY_START,
  jsonArrayText,
  jsonObjectText,
  jsonText,
  jsonValue,
  WORKSPACE,
  type WorkspaceRef,
} from './common.js';

export type { OperationsItem, OperationsToday };

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
// database CPU of json_build_object/json_agg here. The customer and the car come from the booking row itself, as the
// JSON objects its triggers keep, and the time as its stored ISO text (migration 20261123003100): no look-up, no
// escaping and no formatting per item. The text is the same for every request, so it is built once. The workspace is
// a scalar subquery, as the day's bounds are, so every execution is costed alike and PostgreSQL keeps one generic
// plan: a small workspace's plan made for its own id looked cheaper than the generic one, so it was planned afresh
// on every request (0.3 ms of planning for a 0.05 ms execution).
const items = (time: 'pickup' | 'dropoff', statuses: string) => `
    SELECT ${jsonArrayText(
      jsonObjectText([
        ['bookingId', jsonValue.plainString('b.id')],
        ['customer', jsonValue.json('b.customer_json')],
        ['vehicle', jsonValue.json('b.vehicle_json')],
        ['time', jsonValue.plainString(`b.${time}_iso`)],
        ['amount', jsonValue.number('b.amount')],
        ['balanceDue', jsonValue.number('b.balance_due')],
      ]),
      `b.${time}_at, b.id`,
    )}
    FROM bookings b
    WHERE b.workspace_id = ${WORKSPACE} AND b.status IN (${statuses})
      AND b.${time}_at >= ${DAY_START} AND b.${time}_at < ${DAY_END}`;
const OPERATIONS_TODAY = `SELECT ${jsonObjectText([
  ['handovers', `(${items('pickup', `'confirmed', 'active', 'completed'`)})`],
  ['returns', `(${items('dropoff', `'active', 'completed'`)})`],
])} AS body`;

/** The same answer as operationsToday(), as the JSON text of the document's OperationsToday: what the API sends. */
export async function operationsTodayJson(db: Knex, workspace: WorkspaceRef, now: Date): Promise<string> {
  return jsonText(db, OPERATIONS_TODAY, baseBindings(workspace, now), { prepared: true });
}
