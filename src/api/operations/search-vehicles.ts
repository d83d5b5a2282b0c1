import { availabilityClock, searchVehiclesJson, type VehiclePosition } from '../../queries/vehicles.js';
import type { CursorBinding } from '../../http/cursors.js';
import { invalidRequest } from '../../http/error-catalogue.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/vehicles: the vehicles, searched by a term, and available or not within a window.

/** The availability window: `from` and `to` together or not at all, `from` earlier than `to`. */
function readWindow(query: Record<string, unknown>): { from?: Date; to?: Date } {
  const { from, to } = query as { from?: string; to?: string };
  if (from === undefined && to === undefined) return {};
  if (from === undefined)
    throw invalidRequest('from', 'Query parameter "from" is required when "to" is given: send both or neither.');
  if (to === undefined)
    throw invalidRequest('to', 'Query parameter "to" is required when "from" is given: send both or neither.');
  const window = { from: new Date(from), to: new Date(to) };
  // (the date-time format admits a leap second, :60, which no Date holds)
  for (const [name, at] of Object.entries(window)) {
    if (Number.isNaN(at.getTime()))
      throw invalidRequest(
        name,
        `Query parameter "${name}" must be an ISO 8601 date-time this service can hold (a leap second, :60, is not one).`,
      );
  }
  if (!(window.from < window.to)) throw invalidRequest('to', 'Query parameter "to" must be later than "from".');
  return window;
}

export const handle: Handler = async ({ db, caller, now, query, cursors }) => {
  const window = readWindow(query);
  const q = (query.q as string | undefined)?.trim() || undefined;
  // Bound: the term as it is searched for and the window's instants (they decide `available`), not `limit`.
  const binding: CursorBinding = {
    workspaceId: caller.workspace.id,
    parameters: [q ?? null, window.from?.toISOString() ?? null, window.to?.toISOString() ?? null],
  };
  const after =
    query.cursor === undefined
      ? undefined
      : (cursors.decode('vehicles', binding, query.cursor as string) as VehiclePosition);
  const page = await searchVehiclesJson(
    db,
    caller.workspace,
    { q, limit: query.limit as number, ...window, after },
    now,
  );
  return ok(cursors.pageJson('vehicles', binding, page));
};

export const etag: EtagInputs = {
  inputs: { area: 'records' },
  clock: (query, now) =>
    availabilityClock({ from: query.from === undefined ? undefined : new Date(query.from as string) }, now),
};
