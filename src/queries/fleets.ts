import type { Knex } from 'knex';
import type { FleetList, FleetRef } from '../../generated/strict/types.gen.js';
import { rows, type WorkspaceRef } from './common.js';

export type { FleetList };

/** The workspace's fleets, ordered by code: the source of the embedded `fleet` object. */
export async function listFleets(db: Knex, workspace: WorkspaceRef, _now: Date): Promise<FleetList> {
  const list = await rows<FleetRef>(
    db,
    `SELECT id, code, name FROM fleets WHERE workspace_id = :ws ORDER BY code, id`,
    { ws: workspace.id },
    { prepared: true },
  );
  return { rows: list.map((f) => ({ id: f.id, code: f.code, name: f.name })) };
}
