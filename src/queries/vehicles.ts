import type { Knex } from 'knex';
import type { VehicleRow, VehicleSearchResult } from '../../generated/strict/types.gen.js';
import { rows, type WorkspaceRef } from './common.js';

export type { VehicleRow, VehicleSearchResult };

export interface VehicleSearchParams {
  /** Case-insensitive substring of make, model or plate (spaces in the plate ignored). */
  q?: string;
  /** The window [from, to): both or neither, from < to (validated by the API layer). */
  from?: Date;
  to?: Date;
  limit: number;
}

/**
 * Vehicles ordered by make, model, plate. With a window, `available` is worked out for the returned rows only:
 * state active, no confirmed/active booking overlapping [from, to) (an active booking that is late back runs
 * until now), and no maintenance block overlapping it. Ranges are half-open, so a return at 11:00 does not
 * clash with a pickup at 11:00.
 */
export async function searchVehicles(db: Knex, workspace: WorkspaceRef, params: VehicleSearchParams, now: Date): Promise<VehicleSearchResult> {
  const bindings: Record<string, unknown> = { ws: workspace.id, limit: params.limit };
  let filter = '';
  const q = params.q?.trim();
  if (q) {
    // strpos is a literal substring test: no wildcard escaping needed, and cheaper than ILIKE
    bindings.q = q;
    bindings.plateKey = q.replace(/ /g, '');
    filter = `AND (strpos(v.plate_key, lower(:plateKey)) > 0
                   OR strpos(lower(v.make), lower(:q)) > 0 OR strpos(lower(v.model), lower(:q)) > 0)`;
  }
  const window = params.from !== undefined && params.to !== undefined;
  if (window) {
    bindings.from = params.from!.toISOString();
    bindings.to = params.to!.toISOString();
    bindings.now = now.toISOString();
  }
  // The page of vehicles is picked first (LIMIT inside); availability is then probed per returned vehicle
  // through the GiST indexes (LATERAL ... LIMIT 1), never across all bookings of the window.
  const list = await rows<{ id: string; make: string; model: string; plate: string; category: string; daily_rate: number; available?: boolean }>(
    db,
    `
    SELECT l.id, l.make, l.model, l.plate, l.category, l.daily_rate
      ${window ? `, (l.state = 'active' AND bk.hit IS NULL AND mt.hit IS NULL) AS available` : ''}
    FROM (
      SELECT v.id, v.make, v.model, v.plate, v.category, v.daily_rate, v.state
      FROM vehicles v
      WHERE v.workspace_id = :ws ${filter}
      ORDER BY v.make, v.model, v.plate
      LIMIT :limit
    ) l
    ${
      window
        ? `CROSS JOIN (SELECT tstzrange(CAST(:from AS timestamptz), CAST(:to AS timestamptz), '[)') AS win, CAST(:now AS timestamptz) AS now) w
    LEFT JOIN LATERAL (
      -- a confirmed or active booking overlapping the window; an active one that is late back runs until now
      SELECT 1 AS hit FROM bookings b
      WHERE b.vehicle_id = l.id AND b.workspace_id = :ws AND b.status IN ('confirmed', 'active')
        AND (tstzrange(b.pickup_at, b.dropoff_at, '[)') && w.win
             OR (b.status = 'active' AND b.dropoff_at < w.now AND tstzrange(b.pickup_at, w.now, '[)') && w.win))
      LIMIT 1
    ) bk ON true
    LEFT JOIN LATERAL (
      SELECT 1 AS hit FROM maintenance m WHERE m.vehicle_id = l.id AND m.workspace_id = :ws AND m.period && w.win LIMIT 1
    ) mt ON true`
        : ''
    }
    ORDER BY l.make, l.model, l.plate
    `,
    bindings,
  );
  return {
    rows: list.map((v) => {
      const row: VehicleRow = { id: v.id, make: v.make, model: v.model, plate: v.plate, category: v.category, dailyRate: v.daily_rate };
      if (window) row.available = v.available === true;
      return row;
    }),
  };
}
