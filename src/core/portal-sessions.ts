import type { Knex } from 'knex';
import { recordAudit, type AuditContext } from './audit.js';
import { mustReach, type Actor } from './actor.js';
import { ConflictError, CredentialError, InvalidFieldError, NotFoundError } from '../errors.js';
import { hashApiKey, newPortalCredential, PORTAL_LINK_PREFIX, PORTAL_SESSION_PREFIX } from '../secrets.js';

// The settings screen's sessions (src/portal/ serves the screen). The rental platform's backend asks the admin API for
// a link to one workspace; the link carries a one-time key (`frpl_`), which the screen exchanges, once, for a session
// token (`frps_`) kept in an HttpOnly cookie. Both are stored as SHA-256 hashes only. A session acts on its workspace
// only, as a workspace-confined admin token does, and ends at the first of: its absolute end (`expiresAt`, chosen when
// the link was made), IDLE_MINUTES without a request, or being ended (by the admin API, by signing out, by opening
// another link in the same browser, or by revoking the admin token that made its link).

/** How long a link and the session it starts may last, in minutes: the default, and the bounds a caller may choose. */
export const PORTAL_SESSION_MINUTES = { default: 60, min: 5, max: 24 * 60 } as const;
/**
 * A link must be opened within this long of its making (or before its session's end, if sooner): the platform makes
 * one as it shows the screen, so a link that leaks later (a log, a chat, a browser's history) opens nothing.
 */
export const PORTAL_LINK_OPEN_MINUTES = 10;
/** A session with no request for this long has ended. */
export const PORTAL_IDLE_MINUTES = 30;
/** last_seen_at is written at most this often per session: the idle limit needs no finer clock than this. */
const SEEN_EVERY_MS = 15_000;

export interface CreatedPortalLink {
  id: string;
  /** The one-time key for the link: shown once, never stored. */
  key: string;
  readOnly: boolean;
  /** When the link stops opening, if it was not opened before. */
  linkExpiresAt: string;
  /** When the session it starts ends at the latest. */
  expiresAt: string;
}

/** A session as the admin API lists it: never its key or token. */
export interface PortalSessionRecord {
  id: string;
  readOnly: boolean;
  /** `unused`: the link was not opened yet; `active`; `ended` (by the admin API or signing out); `expired` (absolute or idle). */
  state: 'unused' | 'active' | 'ended' | 'expired';
  createdBy: string;
  createdAt: string;
  expiresAt: string;
  startedAt: string | null;
  lastSeenAt: string | null;
  endedAt: string | null;
}

/** A session as authentication finds it. */
export interface PortalSessionHolder {
  id: string;
  workspaceId: string;
  readOnly: boolean;
  /** Who made the link (the admin token's name), for the audit trail's actor. */
  createdBy: string;
  expiresAt: Date;
  /** When it ends if no request comes before (never after expiresAt). */
  idleExpiresAt: Date;
}

/** A link of another workspace than the session the browser holds: not opened, its key not spent, until confirmed. */
export class OtherWorkspaceOpenError extends ConflictError {
  constructor(
    readonly openWorkspace: { id: string; slug: string },
    readonly linkWorkspace: { id: string; slug: string },
  ) {
    super(
      `This browser has the settings of workspace "${openWorkspace.slug}" open, and the link is for workspace "${linkWorkspace.slug}": send "replace": true, once the person has confirmed, to open it in place of the other. The link was not used.`,
      'replace',
    );
  }
}

const iso = (d: Date | null) => d?.toISOString() ?? null;
const linkEnd = (createdAt: Date, expiresAt: Date) =>
  new Date(Math.min(createdAt.getTime() + PORTAL_LINK_OPEN_MINUTES * 60_000, expiresAt.getTime()));
const idleEnd = (lastSeen: Date, expiresAt: Date) =>
  new Date(Math.min(lastSeen.getTime() + PORTAL_IDLE_MINUTES * 60_000, expiresAt.getTime()));

/** The actor of what a session changes: the session, named after who made its link. */
export function portalAudit(
  session: Pick<PortalSessionHolder, 'id' | 'createdBy'>,
  requestId?: string,
  clientRequestId?: string,
): AuditContext {
  return {
    actor: { type: 'portal_session', id: session.id, name: `settings screen (link by ${session.createdBy})` },
    requestId,
    clientRequestId,
  };
}

/** The address a link opens: the screen on the public listener, the one-time key in the fragment (never sent to a server). */
export function portalLinkUrl(publicUrl: string, key: string): string {
  return `${publicUrl}/portal/#key=${key}`;
}

/** A link as its maker is shown it, once: where it opens the screen (`publicUrl`: the public listener's base URL). */
export function portalLinkView(link: CreatedPortalLink, publicUrl: string) {
  return {
    id: link.id,
    url: portalLinkUrl(publicUrl, link.key),
    readOnly: link.readOnly,
    linkExpiresAt: link.linkExpiresAt,
    expiresAt: link.expiresAt,
  };
}

/**
 * A link to the settings screen of one workspace: its one-time key, valid until expiresAt or its first use.
 * `adminTokenId`: the admin token that asked for it (its revocation ends the link), when one did.
 */
export async function createPortalLink(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; expiresInMinutes?: number; readOnly?: boolean; now: Date; adminTokenId?: string },
): Promise<CreatedPortalLink> {
  mustReach(actor, input.workspaceId);
  const { audit } = actor;
  const minutes = input.expiresInMinutes ?? PORTAL_SESSION_MINUTES.default;
  if (!Number.isInteger(minutes) || minutes < PORTAL_SESSION_MINUTES.min || minutes > PORTAL_SESSION_MINUTES.max) {
    throw new InvalidFieldError(
      'expiresInMinutes',
      `must be a whole number from ${PORTAL_SESSION_MINUTES.min} to ${PORTAL_SESSION_MINUTES.max}`,
    );
  }
  const readOnly = input.readOnly ?? false;
  const key = newPortalCredential(PORTAL_LINK_PREFIX);
  const expiresAt = new Date(input.now.getTime() + minutes * 60_000);
  return db.transaction(async (trx) => {
    const [row] = await trx('portal_sessions')
      .insert({
        workspace_id: input.workspaceId,
        read_only: readOnly,
        link_hash: hashApiKey(key),
        created_by: audit.actor.name.slice(0, 200),
        admin_token_id: input.adminTokenId ?? null,
        created_at: input.now,
        expires_at: expiresAt,
      })
      .returning(['id']);
    await recordAudit(trx, audit, {
      action: 'portal_session.create',
      workspaceId: input.workspaceId,
      target: { type: 'portal_session', id: row.id },
      changes: { readOnly, expiresAt: expiresAt.toISOString() },
    });
    return {
      id: row.id as string,
      key,
      readOnly,
      linkExpiresAt: linkEnd(input.now, expiresAt).toISOString(),
      expiresAt: expiresAt.toISOString(),
    };
  });
}

/**
 * Whether the admin token that made a link was revoked. Its revocation ends its links and sessions (src/core/admin-tokens.ts);
 * this also refuses one made by a request that raced the revocation.
 */
const TOKEN_REVOKED =
  'EXISTS (SELECT 1 FROM admin_tokens t WHERE t.id = portal_sessions.admin_token_id AND t.revoked_at IS NOT NULL)';

/**
 * Opens a link: its key is spent (a second use finds nothing) and a session starts, whose token is returned once.
 * A CredentialError `unknown` for a key that is not a live link's (never made, used already, expired or ended): one
 * answer for all, so a guess learns nothing. `open` is the live session the browser holds already: it ends as the new
 * one starts (its cookie is replaced); when it is another workspace's, the link is not opened unless `replace` says the
 * person confirmed (another site may have sent the browser to a link of its own: login CSRF), and its key stays
 * unspent (OtherWorkspaceOpenError). Authentication, not an action: no actor exists before the session does.
 */
export async function startPortalSession(
  db: Knex,
  key: string,
  now: Date,
  options: { requestId?: string; open?: PortalSessionHolder; replace?: boolean } = {},
): Promise<{ token: string; session: PortalSessionHolder }> {
  const unknown = () => new CredentialError('portal_link', 'unknown');
  if (!key.startsWith(PORTAL_LINK_PREFIX)) throw unknown();
  const token = newPortalCredential(PORTAL_SESSION_PREFIX);
  const { open } = options;
  return db.transaction(async (trx) => {
    const live = () =>
      trx('portal_sessions')
        .where({ link_hash: hashApiKey(key) })
        .whereNull('ended_at')
        .where('expires_at', '>', now)
        .where('created_at', '>', new Date(now.getTime() - PORTAL_LINK_OPEN_MINUTES * 60_000))
        .whereRaw(`NOT ${TOKEN_REVOKED}`);
    if (open && !options.replace) {
      const link = await live().first('workspace_id');
      if (!link) throw unknown();
      if (link.workspace_id !== open.workspaceId) {
        const slugs = new Map<string, string>(
          (await trx('workspaces').whereIn('id', [open.workspaceId, link.workspace_id]).select('id', 'slug')).map(
            (w) => [w.id, w.slug],
          ),
        );
        const named = (id: string) => ({ id, slug: slugs.get(id)! });
        throw new OtherWorkspaceOpenError(named(open.workspaceId), named(link.workspace_id as string));
      }
    }
    const [row] = await live()
      .update({ link_hash: null, session_hash: hashApiKey(token), started_at: now, last_seen_at: now })
      .returning(['id', 'workspace_id', 'read_only', 'created_by', 'expires_at']);
    if (!row) throw unknown();
    const session = holder(row, now);
    await recordAudit(trx, portalAudit(session, options.requestId), {
      action: 'portal_session.start',
      workspaceId: session.workspaceId,
      target: { type: 'portal_session', id: session.id },
    });
    if (open)
      await endWhere(trx, trx('portal_sessions').where({ id: open.id }), now, portalAudit(open, options.requestId));
    return { token, session };
  });
}

function holder(
  row: { id: string; workspace_id: string; read_only: boolean; created_by: string; expires_at: Date },
  lastSeen: Date,
): PortalSessionHolder {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    readOnly: row.read_only,
    createdBy: row.created_by,
    expiresAt: row.expires_at,
    idleExpiresAt: idleEnd(lastSeen, row.expires_at),
  };
}

/**
 * The session a token belongs to, if it is live (else a CredentialError: `unknown`, `ended` or `expired`); its use now
 * counts as activity (for the idle limit).
 */
export async function portalSessionHolder(db: Knex, token: string, now: Date): Promise<PortalSessionHolder> {
  if (!token.startsWith(PORTAL_SESSION_PREFIX)) throw new CredentialError('portal_session', 'unknown');
  const row = await db('portal_sessions')
    .where({ session_hash: hashApiKey(token) })
    .first(
      'id',
      'workspace_id',
      'read_only',
      'created_by',
      'expires_at',
      'last_seen_at',
      'ended_at',
      db.raw(`${TOKEN_REVOKED} AS token_revoked`),
    );
  if (!row) throw new CredentialError('portal_session', 'unknown');
  if (row.ended_at || row.token_revoked) throw new CredentialError('portal_session', 'ended');
  if (row.expires_at <= now || idleEnd(row.last_seen_at, row.expires_at) <= now)
    throw new CredentialError('portal_session', 'expired');
  if (now.getTime() - row.last_seen_at.getTime() >= SEEN_EVERY_MS) {
    await db('portal_sessions').where({ id: row.id }).where('last_seen_at', '<', now).update({ last_seen_at: now });
    return holder(row, now);
  }
  return holder(row, row.last_seen_at);
}

const RECORD_COLUMNS = [
  'id',
  'read_only',
  'created_by',
  'created_at',
  'expires_at',
  'started_at',
  'last_seen_at',
  'ended_at',
];

/** A portal_sessions row's RECORD_COLUMNS, as the driver gives them. */
interface PortalSessionRow {
  id: string;
  read_only: boolean;
  created_by: string;
  created_at: Date;
  expires_at: Date;
  started_at: Date | null;
  last_seen_at: Date | null;
  ended_at: Date | null;
}

function record(r: PortalSessionRow, now: Date): PortalSessionRecord {
  const expired =
    r.started_at === null
      ? linkEnd(r.created_at, r.expires_at) <= now
      : r.expires_at <= now || idleEnd(r.last_seen_at ?? r.started_at, r.expires_at) <= now;
  return {
    id: r.id,
    readOnly: r.read_only,
    state: r.ended_at ? 'ended' : expired ? 'expired' : r.started_at ? 'active' : 'unused',
    createdBy: r.created_by,
    createdAt: r.created_at.toISOString(),
    expiresAt: r.expires_at.toISOString(),
    startedAt: iso(r.started_at),
    lastSeenAt: iso(r.last_seen_at),
    endedAt: iso(r.ended_at),
  };
}

/** The workspace's sessions that may still be used (links not opened yet, and active sessions), newest first. */
export async function listPortalSessions(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; now: Date },
): Promise<{ rows: PortalSessionRecord[] }> {
  const { workspaceId, now } = input;
  mustReach(actor, workspaceId);
  const rows = await db('portal_sessions')
    .where({ workspace_id: workspaceId })
    .whereNull('ended_at')
    .where('expires_at', '>', now)
    .orderBy([
      { column: 'created_at', order: 'desc' },
      { column: 'id', order: 'desc' },
    ])
    .select(RECORD_COLUMNS);
  return { rows: rows.map((r) => record(r, now)).filter((r) => r.state !== 'expired') };
}

/**
 * Ends sessions of the workspace now, and links not yet opened: `sessionId`'s only, or every live one (`'every'`). A
 * session ended already keeps its first end. Returns what was ended.
 */
export async function endPortalSessions(
  db: Knex,
  actor: Actor,
  input: { workspaceId: string; sessionId: string | 'every'; now: Date },
): Promise<{ ended: PortalSessionRecord[] }> {
  mustReach(actor, input.workspaceId);
  const { now } = input;
  const { audit } = actor;
  const target = { workspaceId: input.workspaceId, id: input.sessionId === 'every' ? undefined : input.sessionId };
  return db.transaction(async (trx) => {
    if (target.id !== undefined) {
      const found = await trx('portal_sessions').where({ id: target.id, workspace_id: target.workspaceId }).first('id');
      if (!found) throw new NotFoundError(`No settings-screen session with id ${target.id}.`);
    }
    const query = trx('portal_sessions').where({ workspace_id: target.workspaceId });
    if (target.id !== undefined) query.where({ id: target.id });
    else query.where('expires_at', '>', now);
    return { ended: await endWhere(trx, query, now, audit) };
  });
}

/**
 * Ends the links and sessions an admin token made that are still live: its revocation's part (src/core/admin-tokens.ts),
 * inside that action's transaction, with its audit.
 */
export async function endPortalSessionsOfToken(
  trx: Knex.Transaction,
  adminTokenId: string,
  now: Date,
  audit: AuditContext,
): Promise<PortalSessionRecord[]> {
  return endWhere(
    trx,
    trx('portal_sessions').where({ admin_token_id: adminTokenId }).where('expires_at', '>', now),
    now,
    audit,
  );
}

/** Ends the sessions `query` selects that have not ended yet (a session ended already keeps its first end), each audited. */
async function endWhere(
  trx: Knex.Transaction,
  query: Knex.QueryBuilder,
  now: Date,
  audit: AuditContext,
): Promise<PortalSessionRecord[]> {
  const rows = await query
    .whereNull('ended_at')
    .update({ ended_at: now, link_hash: null })
    .returning([...RECORD_COLUMNS, 'workspace_id']);
  for (const row of rows) {
    await recordAudit(trx, audit, {
      action: 'portal_session.end',
      workspaceId: row.workspace_id,
      target: { type: 'portal_session', id: row.id },
    });
  }
  return rows.map((r: PortalSessionRow) => record(r, now));
}
