import { operationsTodayJson } from '../../queries/today.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/operations/today: today's pick-ups, returns and what is overdue, in the workspace's time zone.

export const handle: Handler = async ({ db, caller, now }) => ok(await operationsTodayJson(db, caller.workspace, now));

export const etag: EtagInputs = { inputs: { area: 'records', day: true } };
