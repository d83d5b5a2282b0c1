import type { Knex } from 'knex';
import { baseBindings, rows, TODAY, type WorkspaceRef } from './common.js';

/**
 * The data an answer is built from, as far as its freshness goes: the area of the workspace's tables it reads (each
 * has a version the database keeps, migration 20261125000500), whether it depends on the local date, and the SQL
 * expression of anything else the clock decides (when the answer next changes by the clock alone).
 */
export interface AnswerInputs {
  area: 'records' | 'webhooks';
  day?: boolean;
  clock?: string;
}

const statements = new Map<string, string>();

function statement({ area, day = false, clock }: AnswerInputs): string {
  const key = `${area} ${day} ${clock ?? ''}`;
  let sql = statements.get(key);
  if (sql === undefined) {
    // The sum of the workspace's counters of the area: it grows with every committed change (see the migration).
    const parts = [
      `(SELECT coalesce(sum(changes), 0) FROM workspace_data_versions WHERE workspace_id = :ws AND area = '${area}')`,
    ];
    if (day) parts.push(TODAY);
    if (clock) parts.push(clock);
    statements.set(key, (sql = `SELECT concat_ws('|', ${parts.join(', ')}) AS version`));
  }
  return sql;
}

/**
 * What the answer's data is now, as text that changes whenever the inputs would change the answer: one statement
 * (prepared), index look-ups only. Read before the answer is built, never after: a change committing in between then
 * pairs newer data with the older version (the next request reads the newer one and builds again), never older data
 * with the newer version.
 */
export async function answerVersion(
  db: Knex,
  workspace: WorkspaceRef,
  inputs: AnswerInputs,
  now: Date,
): Promise<string> {
  const [r] = await rows<{ version: string }>(db, statement(inputs), baseBindings(workspace, now), { prepared: true });
  return r.version;
}
