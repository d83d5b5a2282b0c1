import { queueTestDelivery } from '../../core/webhooks/test-delivery.js';
import type { Handler } from '../operation.js';

// POST /v1/webhooks/{id}/test: queues a test delivery to an endpoint (no ETag: not a GET).

export const handle: Handler = async ({ db, caller, now, params, headers }) => {
  const idempotencyKey = headers['idempotency-key'] as string;
  // (its refusals are the core's errors: src/http/error-catalogue.ts coreError answers them, as on every listener)
  const { deliveryId } = await queueTestDelivery(db, {
    workspaceId: caller.workspace.id,
    endpointId: params.id,
    idempotencyKey,
    now,
  });
  return { status: 202, body: { deliveryId } };
};
