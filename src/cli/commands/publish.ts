// `fleet-admin publish`: an event published to a workspace's subscribed endpoints.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import { cliActor } from '../../core/audit.js';
import { publishEvent } from '../../core/webhooks/publish.js';
import { command, jsonObject, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  command(program, 'publish', "publish an event to the workspace's subscribed endpoints")
    .requiredOption('--workspace <slug>', 'the workspace')
    .requiredOption('--event <name>', 'the event name (see the webhooks section of openapi/openapi.yaml)')
    .requiredOption('--data <json>', "the event's data, as JSON", jsonObject)
    .option('--dedupe-key <key>', 'names the occurrence: a second publish with the same key queues nothing')
    .action(async (o: JsonOption & { workspace: string; event: string; data: unknown; dedupeKey?: string }) => {
      const result = await withDatabase(async (db) => {
        const workspace = await findWorkspace(db, o.workspace);
        return publishEvent(db, cliActor(), {
          workspaceId: workspace.id,
          event: o.event,
          data: o.data,
          dedupeKey: o.dedupeKey,
          source: 'publish',
        });
      });
      print(o, { eventId: result.eventId, deliveries: result.deliveries }, (r) =>
        result.duplicate
          ? `event ${r.eventId} was already published under this dedupe key; nothing queued`
          : `event ${r.eventId} queued for ${r.deliveries} endpoint(s)`,
      );
    });
}
