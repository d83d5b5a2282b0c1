import { financeOverview } from '../../queries/finance.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/finance/overview: the money figures.

export const handle: Handler = async ({ db, caller, now }) => ok(await financeOverview(db, caller.workspace, now));

export const etag: EtagInputs = { inputs: { area: 'records', day: true } };
