import { deliveryDetail, deliveryDetailJson } from '../../queries/deliveries.js';
import { apiError } from '../../http/error-catalogue.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/webhooks/{id}/deliveries/{deliveryId}: one delivery and its attempts.

export const handle: Handler = async ({ db, caller, params }) => {
  const detail = await deliveryDetail(
    db,
    { endpointId: params.id, workspaceId: caller.workspace.id },
    params.deliveryId,
  );
  if (!detail) throw apiError('not_found', 'No delivery with this id for this webhook endpoint in your workspace.');
  return ok(deliveryDetailJson(detail));
};

export const etag: EtagInputs = { inputs: { area: 'webhooks' } };
