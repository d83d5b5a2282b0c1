import type { Knex } from 'knex';
import type { OperationsItem, OperationsToday } from '../../generated/openapi/types.gen.js';
import { baseBindings, DAY_END, DAY_START, iso, rows, type WorkspaceRef } from './common.js';

export type { OperationsItem, OperationsToday };


/**
 * Today's handovers (confirmed/active/completed bookings picked up today) and returns (active/completed bookings
 * due back today), today being the workspace's local date. Reads the pickup/dropoff indexes for today's range
 * only; the balance is summed per returned booking.
 */
export async function operationsToday(db: Knex, workspace: WorkspaceRef, now: Date): Promise<OperationsToday> {
  const item = (kind: string, column: string, statuses: string) => `
    SELECT '${kind}' AS kind, b.id, b.${column} AS time, b.amount, c.id AS customer_id, c.name AS customer_name,
           v.id AS vehicle_id, v.plate, d.balance_due
    FROM bookings b
    JOIN customers c ON c.id = b.customer_id AND c.workspace_id = b.workspace_id
    JOIN vehicles v ON v.id = b.vehicle_id AND v.workspace_id = b.workspace_id
    CROSS JOIN LATERAL (
      SELECT coalesce(sum(i.balance), 0) AS balance_due FROM invoices i WHERE i.booking_id = b.id AND i.workspace_id = :ws
    ) d
    WHERE b.workspace_id = :ws AND b.status IN (${statuses})
      AND b.${column} >= ${DAY_START} AND b.${column} < ${DAY_END}`;
  const list = await rows<{
    kind: 'handover' | 'return';
    id: string;
    time: Date;
    amount: number;
    customer_id: string;
    customer_name: string;
    vehicle_id: string;
    plate: string;
    balance_due: number;
  }>(
    db,
    `${item('handover', 'pickup_at', `'confirmed', 'active', 'completed'`)}
     UNION ALL
     ${item('return', 'dropoff_at', `'active', 'completed'`)}
     ORDER BY kind, time, id`,
    baseBindings(workspace, now),
  );
  const result: OperationsToday = { handovers: [], returns: [] };
  for (const r of list) {
    (r.kind === 'handover' ? result.handovers : result.returns).push({
      bookingId: r.id,
      customer: { id: r.customer_id, name: r.customer_name },
      vehicle: { id: r.vehicle_id, plate: r.plate },
      time: iso(r.time),
      amount: r.amount,
      balanceDue: r.balance_due,
    });
  }
  return result;
}
