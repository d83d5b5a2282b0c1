import type { Knex } from 'knex';
import type { BookingStatusCounts, BookingSummary } from '../../generated/strict/types.gen.js';
import { baseBindings, DAY_END, DAY_START, NOW, rows, type WorkspaceRef } from './common.js';

export type { BookingSummary };

const STATUSES = ['pending', 'confirmed', 'active', 'completed', 'canceled'] as const;

/**
 * Booking counts by status and the net collected on booking-linked payments are running totals
 * (booking_status_counts, workspace_totals.booking_collected: append-only, each the sum of its rows). The counts that move with the clock read index ranges
 * of the exceptions only, never the book ahead:
 *   upcoming    the confirmed count less the confirmed bookings whose pickup time has come (bookings_open_status,
 *               up to now: pickups not yet handed over), so the confirmed bookings ahead are never read;
 *   dueReturns  active bookings due back on today's local date (bookings_active_dropoff, today's range);
 *   overdue     active bookings due back before now (bookings_active_dropoff, up to now).
 */
const BOOKING_SUMMARY_SQL = `
  SELECT
    (SELECT json_object_agg(status, n) FROM (SELECT status, sum(count) AS n FROM booking_status_counts WHERE workspace_id = :ws GROUP BY status) s) AS by_status,
    (SELECT count(*) FROM bookings WHERE workspace_id = :ws AND status = 'confirmed' AND pickup_at <= ${NOW}) AS pickup_passed,
    (SELECT count(*) FROM bookings
      WHERE workspace_id = :ws AND status = 'active' AND dropoff_at >= ${DAY_START} AND dropoff_at < ${DAY_END}) AS due_returns,
    (SELECT count(*) FROM bookings WHERE workspace_id = :ws AND status = 'active' AND dropoff_at < ${NOW}) AS overdue,
    (SELECT coalesce(sum(booking_collected), 0) FROM workspace_totals WHERE workspace_id = :ws) AS revenue`;

/**
 * When the summary's clock-bound counts next change, as SQL text: the first pickup still ahead of now among confirmed
 * bookings (`upcoming` loses it once its time has come: pickup_at <= now above) and the first drop-off not yet past
 * among active ones (`overdue` gains it once now is beyond it: dropoff_at < now). Until the clock reaches either, the
 * summary is what it was for the same records and day; so an answer's tag that includes them changes exactly when
 * the clock would change the answer (src/api/revalidation.ts). Two index look-ups (bookings_open_status,
 * bookings_active_dropoff), the first row of each.
 */
export const BOOKING_SUMMARY_NEXT_CHANGE = `concat_ws(',',
    (SELECT min(pickup_at) FROM bookings WHERE workspace_id = :ws AND status = 'confirmed' AND pickup_at > ${NOW}),
    (SELECT min(dropoff_at) FROM bookings WHERE workspace_id = :ws AND status = 'active' AND dropoff_at >= ${NOW}))`;

export async function bookingSummary(db: Knex, workspace: WorkspaceRef, now: Date): Promise<BookingSummary> {
  const [r] = await rows<{
    by_status: Record<string, number> | null;
    pickup_passed: number;
    due_returns: number;
    overdue: number;
    revenue: number;
  }>(db, BOOKING_SUMMARY_SQL, baseBindings(workspace, now), { prepared: true });
  const byStatus = Object.fromEntries(STATUSES.map((s) => [s, Number(r.by_status?.[s] ?? 0)])) as BookingStatusCounts;
  return {
    byStatus,
    total: STATUSES.reduce((sum, s) => sum + byStatus[s], 0),
    active: byStatus.active,
    upcoming: byStatus.confirmed - r.pickup_passed,
    dueReturns: r.due_returns,
    overdue: r.overdue,
    revenueCollected: r.revenue,
  };
}
