import { processConfig } from '../../config.js';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  setEndpointActive,
  switchSignatureScheme,
  updateEndpoint,
} from '../../core/webhooks/endpoints.js';
import { rotateSigningKey, rotateSigningSecret } from '../../core/webhooks/signing-secrets.js';
import { endpointAttemptStats } from '../../core/webhooks/deliveries.js';
import type {
  EndpointCreate,
  EndpointUpdate,
  SecretRotation,
  SignatureSchemeSwitch,
} from '../../../generated/admin-strict/types.gen.js';
import { pathWorkspace, type AdminAction } from './context.js';

// Webhook endpoints (src/core/webhooks/endpoints.ts and signing-secrets.ts), each within the path's workspace: an
// endpoint of another workspace is not found, as if it did not exist. A URL is checked by the service's destination
// policy (its configuration, read here at the edge) and the workspace's own ranges.

export const endpointOperations: Record<string, AdminAction> = {
  async listEndpoints(c) {
    return { status: 200, body: { rows: await listEndpoints(c.db, c.actor, { workspaceId: pathWorkspace(c).id }) } };
  },

  async createEndpoint(c) {
    const { id } = pathWorkspace(c);
    const input = c.body as EndpointCreate;
    return await c.once(input, async (trx) => ({
      status: 201,
      body: await createEndpoint(trx, c.actor, {
        workspaceId: id,
        ...input,
        policy: processConfig().destinationPolicy,
      }),
    }));
  },

  async getEndpoint(c) {
    const input = { endpointId: c.params.endpointId, workspaceId: pathWorkspace(c).id };
    return { status: 200, body: await getEndpoint(c.db, c.actor, input) };
  },

  async updateEndpoint(c) {
    const input = {
      endpointId: c.params.endpointId,
      workspaceId: pathWorkspace(c).id,
      changes: c.body as EndpointUpdate,
      policy: processConfig().destinationPolicy,
    };
    return { status: 200, body: await updateEndpoint(c.db, c.actor, input) };
  },

  async deleteEndpoint(c) {
    await deleteEndpoint(c.db, c.actor, { endpointId: c.params.endpointId, workspaceId: pathWorkspace(c).id });
    return { status: 204, body: undefined };
  },

  async enableEndpoint(c) {
    const input = { endpointId: c.params.endpointId, workspaceId: pathWorkspace(c).id, active: true, now: c.now };
    return { status: 200, body: await setEndpointActive(c.db, c.actor, input) };
  },

  async disableEndpoint(c) {
    const input = { endpointId: c.params.endpointId, workspaceId: pathWorkspace(c).id, active: false, now: c.now };
    return { status: 200, body: await setEndpointActive(c.db, c.actor, input) };
  },

  async rotateEndpointSecret(c) {
    const { id } = pathWorkspace(c);
    const input = (c.body ?? {}) as SecretRotation;
    return await c.once(input, async (trx) => ({
      status: 200,
      body: await rotateSigningSecret(trx, c.actor, {
        endpointId: c.params.endpointId,
        workspaceId: id,
        overlapHours: input.overlapHours,
        now: c.now,
      }),
    }));
  },

  async switchEndpointSignatureScheme(c) {
    const { scheme, overlapHours } = c.body as SignatureSchemeSwitch;
    const input = { endpointId: c.params.endpointId, workspaceId: pathWorkspace(c).id, scheme, overlapHours };
    return { status: 200, body: await switchSignatureScheme(c.db, c.actor, { ...input, now: c.now }) };
  },

  async rotateEndpointSigningKey(c) {
    const { id } = pathWorkspace(c);
    const input = (c.body ?? {}) as SecretRotation;
    return await c.once(input, async (trx) => ({
      status: 200,
      body: await rotateSigningKey(trx, c.actor, {
        endpointId: c.params.endpointId,
        workspaceId: id,
        overlapHours: input.overlapHours,
        now: c.now,
      }),
    }));
  },

  async getEndpointAttemptStats(c) {
    const period = (c.query.period as '24h' | '7d' | undefined) ?? '24h';
    const input = { endpointId: c.params.endpointId, workspaceId: pathWorkspace(c).id, period, now: c.now };
    return { status: 200, body: await endpointAttemptStats(c.db, c.actor, input) };
  },
};
