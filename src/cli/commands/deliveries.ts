// `fleet-admin deliveries ...`: inspect webhook deliveries, and attempt or queue them again.
import type { Command } from 'commander';
import { resendDelivery, retryDelivery } from '../../core/webhooks/recovery.js';
import { listDeliveries, showDelivery, type OperatorDeliveryDetail } from '../../core/webhooks/deliveries.js';
import { cliActor } from '../../core/audit.js';
import { command, type CliIo, type JsonOption } from '../io.js';

/** Text indented by `prefix` on every line. */
const indent = (text: string, prefix: string) =>
  text
    .split('\n')
    .map((line) => prefix + line)
    .join('\n');
/** One delivery for a person: its state, the payload as sent, and each attempt with the start of the receiver's answer. */
const describeDelivery = (d: OperatorDeliveryDetail) =>
  [
    `delivery ${d.id} ${d.event} to endpoint ${d.endpointId}: ${d.status}, ${d.attemptCount} attempt(s), created ${d.createdAt}, next attempt ${d.nextAttemptAt ?? '-'}`,
    'payload:',
    indent(JSON.stringify(d.payload, null, 2), '  '),
    d.attempts.length ? 'attempts:' : 'attempts: none yet',
    ...d.attempts.map((a) => {
      // (a `status` error is "HTTP 500": the kind is said only when it adds something)
      const outcome =
        a.errorKind === null
          ? `accepted, HTTP ${a.statusCode}`
          : `failed, ${a.error ?? a.errorKind}${a.errorKind === 'status' ? '' : ` (${a.errorKind})`}`;
      const answer =
        a.responseBody === null || a.responseBody === ''
          ? '    answer: (none)'
          : `    answer: ${indent(a.responseBody, '      ').trimStart()}`;
      return `  #${a.number} ${a.startedAt} ${a.durationMs} ms: ${outcome}\n${answer}`;
    }),
  ].join('\n');

export function register(program: Command, { withDatabase, print }: CliIo): void {
  const deliveries = program.command('deliveries').description('inspect and resend webhook deliveries');
  command(deliveries, 'list', "an endpoint's deliveries, newest first")
    .requiredOption('--endpoint <id>', 'the endpoint id')
    .action(async (o: JsonOption & { endpoint: string }) => {
      const result = await withDatabase((db) =>
        listDeliveries(db, cliActor(), { endpointId: o.endpoint, workspaceId: 'every' }),
      );
      print(
        o,
        result,
        (r) =>
          r.rows
            .map(
              (d) =>
                `${d.id} ${d.event} ${d.status} attempts=${d.attempts} next=${d.nextAttemptAt ?? '-'} last=${d.lastStatusCode ?? '-'} error=${d.lastError ?? '-'}`,
            )
            .join('\n') || 'no deliveries',
      );
    });
  command(deliveries, 'show', 'one delivery: its state, payload and every attempt with its error')
    .requiredOption('--id <id>', 'the delivery id')
    .action(async (o: JsonOption & { id: string }) => {
      const result = await withDatabase((db) =>
        showDelivery(db, cliActor(), { deliveryId: o.id, workspaceId: 'every' }),
      );
      print(o, result, describeDelivery);
    });
  command(
    deliveries,
    'retry',
    'attempt a delivery now: queued or retrying, at once; failed or accepted, sent again (same id and body; its attempt count continues)',
  )
    .requiredOption('--id <id>', 'the delivery id')
    .action(async (o: JsonOption & { id: string }) => {
      const result = await withDatabase((db) =>
        retryDelivery(db, cliActor(), { deliveryId: o.id, workspaceId: 'every', now: new Date() }),
      );
      print(o, result, (r) =>
        r.previousStatus === 'failed' || r.previousStatus === 'accepted'
          ? `delivery ${r.id} was ${r.previousStatus}; queued again after ${r.attempts} attempt(s), to be attempted now`
          : `delivery ${r.id} (${r.previousStatus}, ${r.attempts} attempt(s) so far) will be attempted now`,
      );
    });
  command(deliveries, 'resend', 'queue a failed delivery again (same id and body; its attempt count continues)')
    .requiredOption('--id <id>', 'the delivery id')
    .action(async (o: JsonOption & { id: string }) => {
      const result = await withDatabase((db) =>
        resendDelivery(db, cliActor(), { deliveryId: o.id, workspaceId: 'every', now: new Date() }),
      );
      print(o, result, (r) => `delivery ${r.id} queued again after ${r.attempts} attempt(s)`);
    });
}
