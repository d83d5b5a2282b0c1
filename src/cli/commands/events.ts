// `fleet-admin events ...`: the events endpoints receive, and examples of them sent.
import type { Command } from 'commander';
import { listEventTypes, sendExampleEvent } from '../../core/webhooks/events.js';
import { cliActor } from '../../core/audit.js';
import { command, type CliIo, type JsonOption } from '../io.js';

export function register(program: Command, { withDatabase, print }: CliIo): void {
  const events = program.command('events').description('the events endpoints receive, and examples of them');
  command(events, 'list', 'every event of the public document, with its group, summary and example data').action(
    async (o: JsonOption) => {
      const result = listEventTypes();
      print(o, result, (r) => r.rows.map((e) => `${e.event.padEnd(28)} ${e.group.padEnd(20)} ${e.summary}`).join('\n'));
    },
  );
  command(
    events,
    'send-example',
    "send the document's example of an event to one endpoint (signed like any delivery; counted as a test delivery)",
  )
    .requiredOption('--endpoint <id>', 'the endpoint id')
    .requiredOption('--event <name>', 'the event (see events list)')
    .action(async (o: JsonOption & { endpoint: string; event: string }) => {
      const result = await withDatabase((db) =>
        sendExampleEvent(db, cliActor(), {
          workspaceId: 'every',
          endpointId: o.endpoint,
          event: o.event,
          now: new Date(),
        }),
      );
      print(o, result, (r) => `example ${r.event} queued for endpoint ${r.endpointId} as delivery ${r.deliveryId}`);
    });
}
