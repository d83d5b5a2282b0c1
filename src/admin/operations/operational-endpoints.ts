import { processConfig } from '../../config.js';
import type { OperatorActor } from '../../core/actor.js';
import {
  createOperationalEndpoint,
  deleteOperationalEndpoint,
  getOperationalEndpoint,
  listOperationalDeliveries,
  listOperationalEndpoints,
  rotateOperationalSecret,
  setOperationalEndpointActive,
  showOperationalDelivery,
  updateOperationalEndpoint,
} from '../../core/webhooks/operational-endpoints.js';
import { apiError } from '../../http/error-catalogue.js';
import type {
  OperationalEndpointCreate,
  OperationalEndpointUpdate,
  SecretRotation,
} from '../../../generated/admin-strict/types.gen.js';
import type { AdminAction, AdminActionContext } from './context.js';

// Operational endpoints (src/core/webhooks/operational-endpoints.ts): the platform's own receivers of operational
// events, across every workspace. The operator's alone: a token confined to a workspace, or the settings screen, is
// refused 403 before anything is looked up.

function operator(c: AdminActionContext): OperatorActor {
  if (c.actor.kind !== 'operator') {
    throw apiError(
      'forbidden',
      "This admin token acts on one workspace only; operational endpoints are the platform's, for a token for every workspace or the CLI.",
    );
  }
  return c.actor;
}

export const operationalEndpointOperations: Record<string, AdminAction> = {
  async listOperationalEndpoints(c) {
    return { status: 200, body: { rows: await listOperationalEndpoints(c.db, operator(c)) } };
  },

  async createOperationalEndpoint(c) {
    const actor = operator(c);
    const input = c.body as OperationalEndpointCreate;
    return await c.once(input, async (trx) => ({
      status: 201,
      body: await createOperationalEndpoint(trx, actor, { ...input, policy: processConfig().destinationPolicy }),
    }));
  },

  async getOperationalEndpoint(c) {
    return { status: 200, body: await getOperationalEndpoint(c.db, operator(c), { endpointId: c.params.endpointId }) };
  },

  async updateOperationalEndpoint(c) {
    const input = {
      endpointId: c.params.endpointId,
      changes: c.body as OperationalEndpointUpdate,
      policy: processConfig().destinationPolicy,
    };
    return { status: 200, body: await updateOperationalEndpoint(c.db, operator(c), input) };
  },

  async deleteOperationalEndpoint(c) {
    await deleteOperationalEndpoint(c.db, operator(c), { endpointId: c.params.endpointId });
    return { status: 204, body: undefined };
  },

  async enableOperationalEndpoint(c) {
    const input = { endpointId: c.params.endpointId, active: true, now: c.now };
    return { status: 200, body: await setOperationalEndpointActive(c.db, operator(c), input) };
  },

  async disableOperationalEndpoint(c) {
    const input = { endpointId: c.params.endpointId, active: false, now: c.now };
    return { status: 200, body: await setOperationalEndpointActive(c.db, operator(c), input) };
  },

  async rotateOperationalEndpointSecret(c) {
    const actor = operator(c);
    const input = (c.body ?? {}) as SecretRotation;
    return await c.once(input, async (trx) => ({
      status: 200,
      body: await rotateOperationalSecret(trx, actor, {
        endpointId: c.params.endpointId,
        overlapHours: input.overlapHours,
        now: c.now,
      }),
    }));
  },

  async listOperationalDeliveries(c) {
    const input = { endpointId: c.params.endpointId, limit: c.query.limit as number | undefined };
    return { status: 200, body: await listOperationalDeliveries(c.db, operator(c), input) };
  },

  async getOperationalDelivery(c) {
    const input = { endpointId: c.params.endpointId, deliveryId: c.params.deliveryId };
    return { status: 200, body: await showOperationalDelivery(c.db, operator(c), input) };
  },
};
