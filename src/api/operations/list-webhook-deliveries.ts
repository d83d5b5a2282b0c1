import { deliveryLog, type DeliveryLogParams, type DeliveryPosition } from '../../queries/deliveries.js';
import type { CursorBinding } from '../../http/cursors.js';
import { apiError } from '../../http/error-catalogue.js';
import { ok, type EtagInputs, type Handler } from '../operation.js';

// GET /v1/webhooks/{id}/deliveries: an endpoint's delivery log, a page at a time.

const endpointNotFound = () => apiError('not_found', 'No webhook endpoint with this id in your workspace.');

export const handle: Handler = async ({ db, caller, params, query, cursors }) => {
  const { status, event, limit } = query as unknown as Omit<DeliveryLogParams, 'after'>;
  // Bound: the endpoint (a cursor of another endpoint's log is refused) and the filters.
  const binding: CursorBinding = {
    workspaceId: caller.workspace.id,
    parameters: [params.id, status ?? null, event ?? null],
  };
  const after =
    query.cursor === undefined
      ? undefined
      : (cursors.decode('deliveries', binding, query.cursor as string) as DeliveryPosition);
  const page = await deliveryLog(
    db,
    { endpointId: params.id, workspaceId: caller.workspace.id },
    { status, event, limit, after },
  );
  if (!page) throw endpointNotFound();
  // lastError is the operator CLI's; the API row is as documented.
  return ok({
    rows: page.rows.map(({ lastError: _lastError, ...row }) => row),
    nextCursor: page.next && cursors.encode('deliveries', binding, page.next),
  });
};

export const etag: EtagInputs = { inputs: { area: 'webhooks' } };
