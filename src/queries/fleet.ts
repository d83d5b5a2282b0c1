import type { Knex } from 'knex';
import type { FleetSummary } from '../../generated/strict/types.gen.js';
import { rows, type WorkspaceRef } from './common.js';

export type { FleetSummary };

/**
 * Vehicles by reported status. A vehicle is in_service / inactive by its stored state; an active one is rented
 * while it has a booking in status active, else available. The rented set comes from the workspace's active
 * bookings (bookings_open_status), never from a scan of all bookings.
 */
export async function fleetSummary(db: Knex, workspace: WorkspaceRef, _now: Date): Promise<FleetSummary> {
  const [r] = await rows<{ total: number; available: number; rented: number; in_service: number; inactive: number; utilization: number }>(
    db,
    `
    WITH counts AS (
      SELECT count(*) AS total,
             count(*) FILTER (WHERE v.state = 'active' AND r.vehicle_id IS NULL) AS available,
             count(*) FILTER (WHERE v.state = 'active' AND r.vehicle_id IS NOT NULL) AS rented,
             count(*) FILTER (WHERE v.state = 'in_service') AS in_service,
             count(*) FILTER (WHERE v.state = 'inactive') AS inactive
      FROM vehicles v
      LEFT JOIN (
        SELECT DISTINCT b.vehicle_id FROM bookings b WHERE b.workspace_id = :ws AND b.status = 'active'
      ) r ON r.vehicle_id = v.id
      WHERE v.workspace_id = :ws
    )
    SELECT total, available, rented, in_service, inactive,
           coalesce(round(rented::numeric / nullif(total - in_service - inactive, 0), 4), 0) AS utilization
    FROM counts
    `,
    { ws: workspace.id },
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
