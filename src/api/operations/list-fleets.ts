import { listFleets } from '../../queries/fleets.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/fleets: the workspace's fleets.

export const handle: Handler = async ({ db, caller, now }) => ok(await listFleets(db, caller.workspace, now));

export const etag: EtagInputs = { inputs: { area: 'records' } };
