import { fleetSummary } from '../../queries/fleet.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/fleet/summary: the fleet's figures now.

export const handle: Handler = async ({ db, caller, now }) => ok(await fleetSummary(db, caller.workspace, now));

export const etag: EtagInputs = { inputs: { area: 'records' } };
