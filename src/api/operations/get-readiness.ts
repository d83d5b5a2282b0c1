import { readiness } from '../../observability/health.js';
import { apiError } from '../../http/error-catalogue.js';
import { ok, type Handler } from '../operation.js';

// GET /readyz: the process can serve, its database answering (no ETag: not a GET of /v1).

export const handle: Handler = async ({ db }) => {
  const result = await readiness(db);
  if (!result.ready) throw apiError('not_ready', result.message, { reason: result.check });
  return ok({ status: 'ready' });
};
