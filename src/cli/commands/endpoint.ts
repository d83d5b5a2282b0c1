// `fleet-admin endpoint ...`: register, change, list and recover webhook endpoints, and rotate their secrets.
import type { Command } from 'commander';
import { findWorkspace } from '../../core/workspaces.js';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  MAX_RATE_LIMIT,
  setEndpointActive,
  SIGNATURE_SCHEMES,
  switchSignatureScheme,
  updateEndpoint,
  type EndpointRecord,
} from '../../core/webhooks/endpoints.js';
import { recoverEndpoint } from '../../core/webhooks/recovery.js';
import {
  DEFAULT_OVERLAP_HOURS,
  MAX_OVERLAP_HOURS,
  rotateSigningKey,
  rotateSigningSecret,
} from '../../core/webhooks/signing-secrets.js';
import { cliActor } from '../../core/audit.js';
import { command, commaList, isoInstant, wholeNumber, type CliIo, type JsonOption } from '../io.js';

/**
 * `--rate-limit`: a whole number of deliveries a second (its range is checked by the core, as for the APIs), or `none`
 * (kept as the word: commander takes a null from a parser for a missing argument).
 */
const rateLimitOption = (value: string): number | 'none' => (value === 'none' ? 'none' : wholeNumber(value));
const rateLimitOf = (option: number | 'none' | undefined) => (option === 'none' ? null : option);
const RATE_LIMIT_HELP = `at most this many deliveries a second to it, 1 to ${MAX_RATE_LIMIT}, across every worker`;

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
/** An endpoint's throttle, as the CLI says it after its events: nothing when it has none. */
const describeRateLimit = (e: EndpointRecord) => (e.rateLimit === null ? '' : `; at most ${e.rateLimit} a second`);
/** The end of the throttle its receiver asked for (429, 502, 503, 504), while it holds; nothing otherwise. */
const describeThrottledUntil = (e: EndpointRecord) =>
  e.throttledUntil && Date.parse(e.throttledUntil) > Date.now() ? `; throttled until ${e.throttledUntil}` : '';
/**
 * An endpoint as `endpoint list` shows it, one line: its state, its events, its failures in a row and last success,
 * the end of its receiver's throttle while one holds it, and how it signs.
 */
const describeEndpointRow = (e: EndpointRecord) =>
  `${describeEndpoint(e)}; events: ${e.events.join(', ') || 'all'}${describeRateLimit(e)}; failures in a row: ${e.consecutiveFailures}; last success: ${e.lastSuccessAt ?? 'never'}${describeThrottledUntil(e)}; ${describeSignature(e)}`;
/** How an endpoint signs, with its public key (not a secret: shown whenever asked). */
const describeSignature = (e: EndpointRecord) =>
  `signed with ${e.signatureScheme}${e.publicKey ? ` (public key ${e.publicKey})` : ''}` +
  (e.previousSchemeExpiresAt ? `; the previous scheme signs too until ${e.previousSchemeExpiresAt}` : '');

export function register(program: Command, io: CliIo): void {
  const endpoint = program.command('endpoint').description('register, list, switch and recover webhook endpoints');
  create(endpoint, io);
  enableAndDisable(endpoint, io);
  update(endpoint, io);
  remove(endpoint, io);
  list(endpoint, io);
  recover(endpoint, io);
  rotateSecret(endpoint, io);
  show(endpoint, io);
  switchScheme(endpoint, io);
  rotateKey(endpoint, io);
}

function create(endpoint: Command, { config, withDatabase, print }: CliIo): void {
  command(endpoint, 'create', 'register a webhook endpoint (its signing secret is shown only this once)')
    .requiredOption('--workspace <slug>', 'the workspace')
    .requiredOption('--url <url>', 'http or https URL deliveries are POSTed to')
    .option('--name <name>', "display name (default: the URL's host)")
    .option('--events <names>', 'comma-separated event names (default: every event)', commaList)
    .option('--allow-duplicate-url', 'register it even though another endpoint of the workspace has this URL')
    .option(
      '--signature-scheme <scheme>',
      `${SIGNATURE_SCHEMES.join(' or ')} (default hmac-sha256; ed25519 signs v1a with a key pair of its own)`,
    )
    .option('--rate-limit <n>', `${RATE_LIMIT_HELP} (default: none)`, rateLimitOption)
    .action(
      async (
        o: JsonOption & {
          workspace: string;
          url: string;
          name?: string;
          events?: string[];
          allowDuplicateUrl?: boolean;
          signatureScheme?: string;
          rateLimit?: number | 'none';
        },
      ) => {
        const input = {
          signatureScheme: o.signatureScheme,
          url: o.url,
          name: o.name,
          events: o.events,
          allowDuplicateUrl: o.allowDuplicateUrl,
          rateLimit: rateLimitOf(o.rateLimit),
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
            `endpoint ${e.id} "${e.name}" -> ${e.url} (events: ${e.events.join(', ') || 'all'}${describeRateLimit(e)}); signing secret, shown only this once:\n${e.secret}` +
            (e.publicKey ? `\nsigned with ed25519 (v1a): receivers verify with the public key ${e.publicKey}` : ''),
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
  command(
    endpoint,
    'update',
    "change a webhook endpoint's URL, name, events or rate limit (those given; the others stay)",
  )
    .requiredOption('--id <id>', 'the endpoint id')
    .option('--url <url>', 'http or https URL deliveries are POSTed to (queued deliveries go there too)')
    .option('--name <name>', 'display name')
    .option('--events <names>', 'comma-separated event names; "" for every event', commaList)
    .option('--allow-duplicate-url', 'take the URL even though another endpoint of the workspace has it')
    .option('--rate-limit <n>', `${RATE_LIMIT_HELP}; "none" removes the limit`, rateLimitOption)
    .action(
      async (
        o: JsonOption & {
          id: string;
          url?: string;
          name?: string;
          events?: string[];
          allowDuplicateUrl?: boolean;
          rateLimit?: number | 'none';
        },
      ) => {
        const changes = {
          url: o.url,
          name: o.name,
          events: o.events,
          allowDuplicateUrl: o.allowDuplicateUrl,
          rateLimit: rateLimitOf(o.rateLimit),
        };
        const record = await withDatabase((db) =>
          updateEndpoint(db, cliActor(), {
            endpointId: o.id,
            workspaceId: 'every',
            changes,
            policy: config.destinationPolicy,
          }),
        );
        print(
          o,
          record,
          (e) => `${describeEndpoint(e)} (events: ${e.events.join(', ') || 'all'}${describeRateLimit(e)})`,
        );
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

function show(endpoint: Command, { withDatabase, print }: CliIo): void {
  command(endpoint, 'show', 'show a webhook endpoint, with its public key when it signs with ed25519 (never a secret)')
    .requiredOption('--id <id>', 'the endpoint id')
    .action(async (o: JsonOption & { id: string }) => {
      const record = await withDatabase((db) =>
        getEndpoint(db, cliActor(), { endpointId: o.id, workspaceId: 'every' }),
      );
      print(o, record, describeEndpointRow);
    });
}

function switchScheme(endpoint: Command, { withDatabase, print }: CliIo): void {
  command(
    endpoint,
    'switch-signature-scheme',
    "switch how a webhook endpoint's deliveries are signed; the old scheme keeps signing beside the new during the overlap",
  )
    .requiredOption('--id <id>', 'the endpoint id')
    .requiredOption('--scheme <scheme>', `${SIGNATURE_SCHEMES.join(' or ')} (ed25519: a new key pair, v1a)`)
    .option(
      '--overlap-hours <hours>',
      `hours during which deliveries carry both schemes' signatures, 0 to ${MAX_OVERLAP_HOURS} (default ${DEFAULT_OVERLAP_HOURS})`,
      wholeNumber,
    )
    .action(async (o: JsonOption & { id: string; scheme: string; overlapHours?: number }) => {
      const input = { endpointId: o.id, workspaceId: 'every', scheme: o.scheme, overlapHours: o.overlapHours };
      const record = await withDatabase((db) => switchSignatureScheme(db, cliActor(), { ...input, now: new Date() }), {
        masterKey: 'needed',
      });
      print(o, record, describeEndpointRow);
    });
}

function rotateKey(endpoint: Command, { withDatabase, print }: CliIo): void {
  command(
    endpoint,
    'rotate-signing-key',
    'give an ed25519 webhook endpoint a new key pair (the private key is never shown); the old one keeps signing during the overlap',
  )
    .requiredOption('--id <id>', 'the endpoint id')
    .option(
      '--overlap-hours <hours>',
      `hours during which deliveries carry v1a signatures with both keys, 0 to ${MAX_OVERLAP_HOURS} (default ${DEFAULT_OVERLAP_HOURS})`,
      wholeNumber,
    )
    .action(async (o: JsonOption & { id: string; overlapHours?: number }) => {
      const input = { endpointId: o.id, workspaceId: 'every', overlapHours: o.overlapHours, now: new Date() };
      const rotated = await withDatabase((db) => rotateSigningKey(db, cliActor(), input), { masterKey: 'needed' });
      print(
        o,
        rotated,
        (r) =>
          `endpoint ${r.id}: new public key ${r.publicKey}\n` +
          (r.previousKeyExpiresAt
            ? `the old key pair also signs every delivery until ${r.previousKeyExpiresAt}`
            : 'the old key pair no longer signs anything'),
      );
    });
}
