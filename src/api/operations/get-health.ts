import { ok, type Handler } from '../operation.js';

// GET /healthz: the process is alive (no ETag: not a GET of /v1).

export const handle: Handler = async () => ok({ status: 'ok' });
