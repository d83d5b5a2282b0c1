import type { Knex } from 'knex';
import type { BookingStatusCounts, BookingSummary } from '../../generated/strict/types.gen.js';
import { baseBindings, DAY_END, DAY_START, NOW, rows, type WorkspaceRef } from './common.js';

export type { BookingSummary };

const STATUSES = ['pending', 'confirmed', 'active', 'completed', 'canceled'] as const;

/**
 * Booking counts by status (booking_status_counts), upcoming confirmed pickups, today's due returns and overdue
 * active bookings (bookings_open_status: open bookings only), and the net collected on booking-linked payments
 * (workspace_totals.booking_collected).
 */
export async function bookingSummary(db: Knex, workspace: WorkspaceRef, now: Date): Promise<BookingSummary> {
  const [r] = await rows<{ by_status: Record<string, number> | null; upcoming: number; due_returns: number; overdue: number; revenue: number }>(
    db,
    `
    SELECT
      (SELECT json_object_agg(status, count) FROM booking_status_counts WHERE workspace_id = :ws) AS by_status,
      (SELECT count(*) FROM bookings
        WHERE workspace_id = :ws AND status = 'confirmed' AND pickup_at > ${NOW}) AS upcoming,
      a.due_returns, a.overdue,
      (SELECT coalesce(max(booking_collected), 0) FROM workspace_totals WHERE workspace_id = :ws) AS revenue
    FROM (
      SELECT count(*) FILTER (WHERE dropoff_at >= ${DAY_START} AND dropoff_at < ${DAY_END}) AS due_returns,
             count(*) FILTER (WHERE dropoff_at < ${NOW}) AS overdue
      FROM bookings WHERE workspace_id = :ws AND status = 'active'
    ) a
    `,
    baseBindings(workspace, now),
    { prepared: true },
  );
  const byStatus = Object.fromEntries(STATUSES.map((s) => [s, Number(r.by_status?.[s] ?? 0)])) as BookingStatusCounts;
  return {
    byStatus,
    total: STATUSES.reduce((sum, s) => sum + byStatus[s], 0),
    active: byStatus.active,
    upcoming: r.upcoming,
    dueReturns: r.due_returns,
    overdue: r.overdue,
    revenueCollected: r.revenue,
  };
}
