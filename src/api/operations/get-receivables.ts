import { receivablesJson, type ReceivablesPosition } from '../../queries/receivables.js';
import type { CursorBinding } from '../../http/cursors.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/finance/receivables: what customers owe, a page at a time.

export const handle: Handler = async ({ db, caller, now, query, cursors }) => {
  const search = query.search as string | undefined;
  const binding: CursorBinding = { workspaceId: caller.workspace.id, parameters: [search ?? null] };
  const after =
    query.cursor === undefined
      ? undefined
      : (cursors.decode('receivables', binding, query.cursor as string) as ReceivablesPosition);
  return ok(
    cursors.pageJson(
      'receivables',
      binding,
      await receivablesJson(db, caller.workspace, { search, limit: query.limit as number, after }, now),
    ),
  );
};

export const etag: EtagInputs = { inputs: { area: 'records', day: true } };
