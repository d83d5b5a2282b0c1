import type { Knex } from 'knex';
import type { FleetSummary } from '../../generated/strict/types.gen.js';
import { rows, type WorkspaceRef } from './common.js';

export type { FleetSummary };

/**
 * Vehicles by reported status. A vehicle is in_service / inactive by its stored state; an active one is rented
 * while it has a booking in status active, else available. Every figure comes from vehicle_state_counts (per stored
 * state: the vehicles, and those with an active booking), a running total: four rows whatever the size of the fleet.
 */
const FLEET_SUMMARY_SQL = `
  SELECT total, active - rented AS available, rented, in_service, inactive,
         coalesce(round(rented::numeric / nullif(total - in_service - inactive, 0), 4), 0) AS utilization
  FROM (
    SELECT coalesce(sum(count), 0) AS total,
           coalesce(sum(count) FILTER (WHERE state = 'active'), 0) AS active,
           coalesce(sum(rented) FILTER (WHERE state = 'active'), 0) AS rented,
           coalesce(sum(count) FILTER (WHERE state = 'in_service'), 0) AS in_service,
           coalesce(sum(count) FILTER (WHERE state = 'inactive'), 0) AS inactive
    FROM vehicle_state_counts WHERE workspace_id = :ws
  ) s`;

export async function fleetSummary(db: Knex, workspace: WorkspaceRef, _now: Date): Promise<FleetSummary> {
  const [r] = await rows<{
    total: number;
    available: number;
    rented: number;
    in_service: number;
    inactive: number;
    utilization: number;
  }>(db, FLEET_SUMMARY_SQL, { ws: workspace.id }, { prepared: true });
  return {
    total: r.total,
    byStatus: { available: r.available, rented: r.rented, in_service: r.in_service, inactive: r.inactive },
    available: r.available,
    rented: r.rented,
    inService: r.in_service,
    utilization: r.utilization,
  };
}
