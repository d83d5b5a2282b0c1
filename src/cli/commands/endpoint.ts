// `fleet-admin endpoint ...`: register, change, list and recover webhook endpoints, and rotate their secrets.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import {
  createEndpoint,
  deleteEndpoint,
  listEndpoints,
  setEndpointActive,
  updateEndpoint,
  type EndpointRecord,
} from '../../core/webhooks/endpoints.js';
import { recoverEndpoint } from '../../core/webhooks/recovery.js';
import { DEFAULT_OVERLAP_HOURS, MAX_OVERLAP_HOURS, rotateSigningSecret } from '../../core/webhooks/signing-secrets.js';
import { cliActor } from '../../core/audit.js';
import { command, commaList, isoInstant, wholeNumber, type CliIo, type JsonOption } from '../io.js';

/** Why an endpoint is off, as the CLI says it (the documents' EndpointDisabledReason). */
const DISABLED_BECAUSE: Record<NonNullable<EndpointRecord['disabledReason']>, string> = {
  failures: 'after 20 failed attempts in a row',
  gone: 'its receiver answered 410 Gone',
  manual: 'switched off by hand',
};
const describeEndpoint = (e: EndpointRecord) =>
  `endpoint ${e.id} "${e.name}" -> ${e.url} is ${
    e.isActive ? 'enabled' : `disabled since ${e.disabledAt} (${DISABLED_BECAUSE[e.disabledReason ?? 'manual']})`
  }`;
/**
 * An endpoint as `endpoint list` shows it, one line: its state, its events, its failures in a row and last success,
 * and the end of its throttle while one holds it.
 */
const describeEndpointRow = (e: EndpointRecord) =>
  `${describeEndpoint(e)}; events: ${e.events.join(', ') || 'all'}; failures in a row: ${e.consecutiveFailures}; last success: ${e.lastSuccessAt ?? 'never'}${
    e.throttledUntil && Date.parse(e.throttledUntil) > Date.now() ? `; throttled until ${e.throttledUntil}` : ''
  }`;

export function register(program: Command, io: CliIo): void {
  const endpoint = program.command('endpoint').description('register, list, switch and recover webhook endpoints');
  create(endpoint, io);
  enableAndDisable(endpoint, io);
  update(endpoint, io);
  remove(endpoint, io);
  list(endpoint, io);
  recover(endpoint, io);
  rotateSecret(endpoint, io);
}

function create(endpoint: Command, { config, withDatabase, print }: CliIo): void {
  command(endpoint, 'create', 'register a webhook endpoint (its signing secret is shown only this once)')
    .requiredOption('--workspace <slug>', 'the workspace')
    .requiredOption('--url <url>', 'http or https URL deliveries are POSTed to')
    .option('--name <name>', "display name (default: the URL's host)")
    .option('--events <names>', 'comma-separated event names (default: every event)', commaList)
    .option('--allow-duplicate-url', 'register it even though another endpoint of the workspace has this URL')
    .action(
      async (
        o: JsonOption & {
          workspace: string;
          url: string;
          name?: string;
          events?: string[];
          allowDuplicateUrl?: boolean;
        },
      ) => {
        const input = {
          url: o.url,
          name: o.name,
          events: o.events,
          allowDuplicateUrl: o.allowDuplicateUrl,
          policy: config.destinationPolicy,
        };
        const created = await withDatabase(
          async (db) =>
            createEndpoint(db, cliActor(), { workspaceId: (await findWorkspace(db, o.workspace)).id, ...input }),
          { masterKey: 'needed' },
        );
        print(
          o,
          created,
          (e) =>
            `endpoint ${e.id} "${e.name}" -> ${e.url} (events: ${e.events.join(', ') || 'all'}); signing secret, shown only this once:\n${e.secret}`,
        );
      },
    );
}

function enableAndDisable(endpoint: Command, { withDatabase, print }: CliIo): void {
  for (const [name, active] of [
    ['enable', true],
    ['disable', false],
  ] as const) {
    command(endpoint, name, `switch a webhook endpoint ${active ? 'on' : 'off'}`)
      .requiredOption('--id <id>', 'the endpoint id')
      .action(async (o: JsonOption & { id: string }) => {
        const record = await withDatabase((db) =>
          setEndpointActive(db, cliActor(), { endpointId: o.id, workspaceId: 'every', active, now: new Date() }),
        );
        print(o, record, describeEndpoint);
      });
  }
}

function update(endpoint: Command, { config, withDatabase, print }: CliIo): void {
  command(endpoint, 'update', "change a webhook endpoint's URL, name or events (those given; the others stay)")
    .requiredOption('--id <id>', 'the endpoint id')
    .option('--url <url>', 'http or https URL deliveries are POSTed to (queued deliveries go there too)')
    .option('--name <name>', 'display name')
    .option('--events <names>', 'comma-separated event names; "" for every event', commaList)
    .option('--allow-duplicate-url', 'take the URL even though another endpoint of the workspace has it')
    .action(
      async (
        o: JsonOption & { id: string; url?: string; name?: string; events?: string[]; allowDuplicateUrl?: boolean },
      ) => {
        const changes = { url: o.url, name: o.name, events: o.events, allowDuplicateUrl: o.allowDuplicateUrl };
        const record = await withDatabase((db) =>
          updateEndpoint(db, cliActor(), {
            endpointId: o.id,
            workspaceId: 'every',
            changes,
            policy: config.destinationPolicy,
          }),
        );
        print(o, record, (e) => `${describeEndpoint(e)} (events: ${e.events.join(', ') || 'all'})`);
      },
    );
}

function remove(endpoint: Command, { withDatabase, print }: CliIo): void {
  command(
    endpoint,
    'delete',
    'delete a webhook endpoint: its pending deliveries are marked failed and none is sent any more',
  )
    .requiredOption('--id <id>', 'the endpoint id')
    .action(async (o: JsonOption & { id: string }) => {
      const deleted = await withDatabase((db) =>
        deleteEndpoint(db, cliActor(), { endpointId: o.id, workspaceId: 'every' }),
      );
      print(o, deleted, (r) => `endpoint ${r.id} deleted; its pending deliveries are marked failed (endpoint_deleted)`);
    });
}

function list(endpoint: Command, { withDatabase, print }: CliIo): void {
  command(endpoint, 'list', "list a workspace's webhook endpoints (never their signing secrets)")
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const rows = await withDatabase(async (db) =>
        listEndpoints(db, cliActor(), { workspaceId: (await findWorkspace(db, o.workspace)).id }),
      );
      print(o, { rows }, (r) => r.rows.map(describeEndpointRow).join('\n') || 'no endpoints');
    });
}

function recover(endpoint: Command, { withDatabase, print }: CliIo): void {
  command(
    endpoint,
    'recover',
    'queue again every failed delivery of an endpoint created in a time window (after an outage)',
  )
    .requiredOption('--id <id>', 'the endpoint id')
    .requiredOption(
      '--since <iso>',
      'start of the window (ISO 8601, inclusive), by when deliveries were created',
      isoInstant,
    )
    .option('--until <iso>', 'end of the window (ISO 8601, exclusive; default: now)', isoInstant)
    .action(async (o: JsonOption & { id: string; since: Date; until?: Date }) => {
      const result = await withDatabase((db) =>
        recoverEndpoint(db, cliActor(), {
          endpointId: o.id,
          workspaceId: 'every',
          since: o.since,
          until: o.until,
          now: new Date(),
        }),
      );
      print(
        o,
        result,
        (r) => `${r.queued} failed deliver${r.queued === 1 ? 'y' : 'ies'} of endpoint ${r.endpointId} queued again`,
      );
    });
}

function rotateSecret(endpoint: Command, { withDatabase, print }: CliIo): void {
  command(
    endpoint,
    'rotate-secret',
    'give a webhook endpoint a new signing secret (shown only this once); the old one keeps signing during the overlap',
  )
    .requiredOption('--id <id>', 'the endpoint id')
    .option(
      '--overlap-hours <hours>',
      `hours during which deliveries carry signatures with both secrets, 0 to ${MAX_OVERLAP_HOURS} (default ${DEFAULT_OVERLAP_HOURS}; 0 ends the old secret at once)`,
      wholeNumber,
    )
    .action(async (o: JsonOption & { id: string; overlapHours?: number }) => {
      const rotated = await withDatabase(
        (db) =>
          rotateSigningSecret(db, cliActor(), {
            endpointId: o.id,
            workspaceId: 'every',
            overlapHours: o.overlapHours,
            now: new Date(),
          }),
        { masterKey: 'needed' },
      );
      print(
        o,
        rotated,
        (r) =>
          `endpoint ${r.id}: new signing secret, shown only this once:\n${r.secret}\n` +
          (r.previousSecretExpiresAt
            ? `the old secret also signs every delivery until ${r.previousSecretExpiresAt}`
            : 'the old secret no longer signs anything'),
      );
    });
}
