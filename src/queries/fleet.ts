import type { Knex } from 'knex';
import type { FleetSummary } from '../../generated/strict/types.gen.js';
import { rows, type WorkspaceRef } from './common.js';

export type { FleetSummary };

/**
 * Vehicles by reported status. A vehicle is in_service / inactive by its stored state; an active one is rented
 * while it has a booking in status active, else available. The counts by stored state come from
 * vehicle_state_counts; the rented ones from the workspace's active bookings (bookings_open_status), never from a
 * scan of all vehicles or bookings.
 */
export async function fleetSummary(db: Knex, workspace: WorkspaceRef, _now: Date): Promise<FleetSummary> {
  const [r] = await rows<{ total: number; available: number; rented: number; in_service: number; inactive: number; utilization: number }>(
    db,
    `
    WITH states AS (
      SELECT coalesce(sum(count), 0) AS total,
             coalesce(sum(count) FILTER (WHERE state = 'active'), 0) AS active,
             coalesce(sum(count) FILTER (WHERE state = 'in_service'), 0) AS in_service,
             coalesce(sum(count) FILTER (WHERE state = 'inactive'), 0) AS inactive
      FROM vehicle_state_counts WHERE workspace_id = :ws
    ),
    rented AS (
      -- each car out now looked up by its key (a correlated subquery: the planner would rather hash every vehicle);
      -- both reads are index-only (bookings_active_vehicle, vehicles_active)
      SELECT count(*) AS rented
      FROM (SELECT DISTINCT b.vehicle_id FROM bookings b WHERE b.workspace_id = :ws AND b.status = 'active') b
      WHERE (SELECT true FROM vehicles v WHERE v.workspace_id = :ws AND v.id = b.vehicle_id AND v.state = 'active') IS TRUE
    )
    SELECT total, active - rented AS available, rented, in_service, inactive,
           coalesce(round(rented::numeric / nullif(total - in_service - inactive, 0), 4), 0) AS utilization
    FROM states, rented
    `,
    { ws: workspace.id },
    { prepared: true },
  );
  return {
    total: r.total,
    byStatus: { available: r.available, rented: r.rented, in_service: r.in_service, inactive: r.inactive },
    available: r.available,
    rented: r.rented,
    inService: r.in_service,
    utilization: r.utilization,
  };
}
