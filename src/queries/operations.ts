import type { Knex } from 'knex';
import type { OperationsItem, OperationsToday } from '../../generated/strict/types.gen.js';
import { baseBindings, DAY_END, DAY_START, rows, type WorkspaceRef } from './common.js';

export type { OperationsItem, OperationsToday };

/** An item as SQL builds it: `time` in epoch milliseconds (to_char would cost more than the rest of the query). */
type RawItem = Omit<OperationsItem, 'time'> & { time: number };
const withIso = (item: RawItem): OperationsItem => ({ ...item, time: new Date(item.time).toISOString() });

/**
 * Today's handovers (confirmed/active/completed bookings picked up today) and returns (active/completed bookings
 * due back today), today being the workspace's local date. Reads the pickup/dropoff indexes for today's range
 * only; balanceDue is the booking's running open balance (bookings.balance_due).
 */
export async function operationsToday(db: Knex, workspace: WorkspaceRef, now: Date): Promise<OperationsToday> {
  // Built as JSON in SQL: a busy day has thousands of items, and one JSON value is far cheaper for Node to
  // receive than thousands of typed rows. Customer and vehicle are looked up per returned booking.
  const items = (column: string, statuses: string) => `
    SELECT coalesce(json_agg(json_build_object(
             'bookingId', b.id,
             'customer', (SELECT json_build_object('id', c.id, 'name', c.name) FROM customers c WHERE c.id = b.customer_id AND c.workspace_id = :ws),
             'vehicle', (SELECT json_build_object('id', v.id, 'plate', v.plate) FROM vehicles v WHERE v.id = b.vehicle_id AND v.workspace_id = :ws),
             'time', floor(extract(epoch FROM b.${column}) * 1000)::bigint,
             'amount', b.amount,
             'balanceDue', b.balance_due
           ) ORDER BY b.${column}, b.id), '[]')
    FROM bookings b
    WHERE b.workspace_id = :ws AND b.status IN (${statuses})
      AND b.${column} >= ${DAY_START} AND b.${column} < ${DAY_END}`;
  const [r] = await rows<{ handovers: RawItem[]; returns: RawItem[] }>(
    db,
    `SELECT (${items('pickup_at', `'confirmed', 'active', 'completed'`)}) AS handovers,
            (${items('dropoff_at', `'active', 'completed'`)}) AS returns`,
    baseBindings(workspace, now),
    { prepared: true },
  );
  return { handovers: r.handovers.map(withIso), returns: r.returns.map(withIso) };
}
