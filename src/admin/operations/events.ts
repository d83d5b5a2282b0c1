import { listEventTypes, sendExampleEvent } from '../../core/webhooks/events.js';
import { publishEvent } from '../../core/webhooks/publish.js';
import type { ExampleEventRequest, PublishEventRequest } from '../../../generated/admin-strict/types.gen.js';
import { pathWorkspace, type AdminAction } from './context.js';

// Events (src/core/webhooks/events.ts, publish.ts): the catalogue, publishing one, and sending an event's example to
// one endpoint.

export const eventOperations: Record<string, AdminAction> = {
  async listEventTypes() {
    return { status: 200, body: listEventTypes() };
  },

  async publishEvent(c) {
    const { id } = pathWorkspace(c);
    const input = c.body as PublishEventRequest;
    return await c.once(input, async (trx) => ({
      status: 201,
      body: await publishEvent(trx, c.actor, {
        workspaceId: id,
        event: input.event,
        data: input.data,
        dedupeKey: input.dedupeKey,
        source: 'publish',
      }),
    }));
  },

  async sendExampleEvent(c) {
    const { id } = pathWorkspace(c);
    const input = c.body as ExampleEventRequest;
    return await c.once(input, async (trx) => ({
      status: 202,
      body: await sendExampleEvent(trx, c.actor, {
        workspaceId: id,
        endpointId: input.endpointId,
        event: input.event,
        now: c.now,
      }),
    }));
  },
};
