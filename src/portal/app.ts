// The workspace's API settings screen, served on the public listener under /portal/ (the staff's browsers reach the
// public address; the admin listener stays on 127.0.0.1). It is the third client of the core: its pages
// (src/portal/assets/, plain ES modules, no build step) call the admin document's operations that list the
// `portalSession` scheme, at /portal/api + their path, through the same router as the admin listener
// (src/admin/app.ts), with a session in place of an admin token. What a session is lives in src/core/portal-sessions.ts.
//
// The cookie lasts the browser session (no Max-Age): the server ends the session anyway, and a closed browser keeps
// nothing. Over https it is `__Host-frs_portal` (Secure, Path=/, no Domain), which no other host of the site, nor a
// plain-http answer, can set or overwrite. A browser holds one session: a link of another workspace than the live
// session's is opened only once the person confirms (login CSRF). Link openings and session cookies have a failure
// budget of their own (FRS_PORTAL_AUTH_FAILURE_LIMIT), apart from the API keys', which any web page can spend by making
// a browser send key-less requests.
//
// Why a cookie: the session token is HttpOnly, so no script (the page's, or one injected despite the CSP) can read it
// and send it elsewhere. In an iframe on the rental platform's site the screen is a third party, and browsers that
// block third-party cookies (Chrome's phase-out, Safari) still keep a Partitioned one (CHIPS), keyed to the embedding
// site; so with FRS_PORTAL_FRAME_ANCESTORS set, the cookie is `SameSite=None; Secure; Partitioned`, and `SameSite=Lax`
// otherwise. CSRF: every write must send X-CSRF-Token, an HMAC of the session id under a key derived from the API
// process's own secret (it opens nothing), which the page gets from its own same-origin calls; another site can neither read it nor send the header
// without a CORS preflight this service never grants.
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { Knex } from 'knex';
import { adminRouter } from '../admin/app.js';
import { guardedLookup } from '../admin/auth.js';
import { apiError, coreError, errorBody, invalidRequest } from '../http/error-catalogue.js';
import { CredentialError } from '../errors.js';
import { AuthFailureLimits, type AuthGuard } from '../http/auth-failures.js';
import { noRoute } from '../http/edge.js';
import { readJsonBody } from '../http/json-body.js';
import type { RequestContext, RequestMiddleware } from '../http/request-state.js';
import type { Cursors } from '../http/cursors.js';
import { derivedKeys, hashApiKey, type KeyringOptions } from '../secrets.js';
import { findWorkspace, toWorkspaceView } from '../core/workspaces.js';
import {
  endPortalSessions,
  OtherWorkspaceOpenError,
  PORTAL_IDLE_MINUTES,
  portalAudit,
  portalSessionHolder,
  startPortalSession,
  type PortalSessionHolder,
} from '../core/portal-sessions.js';
import type { PortalSettings } from './settings.js';

export const PORTAL_COOKIE = 'frs_portal';
/** The cookie's name over https: the browser keeps it only if Secure, on Path=/ and with no Domain. */
export const PORTAL_HOST_COOKIE = `__Host-${PORTAL_COOKIE}`;
const API_PREFIX = '/portal/api';
const ASSETS_PREFIX = '/portal/assets/';
export const CSRF_KEY_LABEL = 'portal-csrf-v1';
const ASSETS_DIR = new URL('./assets/', import.meta.url);

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface Asset {
  body: Buffer;
  type: string;
  etag: string;
}

/** The screen's files, read once: a flat folder, only the kinds above (nothing else there is ever served). */
function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  if (!fs.existsSync(ASSETS_DIR)) return assets;
  for (const name of fs.readdirSync(ASSETS_DIR)) {
    const type = CONTENT_TYPES[name.slice(name.lastIndexOf('.'))];
    if (!type || !/^[\w.-]+$/.test(name)) continue;
    const body = fs.readFileSync(new URL(name, ASSETS_DIR));
    assets.set(name, {
      body,
      type,
      etag: `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
    });
  }
  return assets;
}

/** What the public listener lends the screen beside its API (src/api/app.ts's ListenerEdge), and what main gives it. */
export interface PortalOptions {
  /** Connections as the admin API's database role: the screen changes what the admin API changes. */
  db: Knex;
  settings: PortalSettings;
  clock: () => Date;
  cursors: Cursors;
  /** The client address (as the listener works it out), and the API keys' failure limit, which the screen does not use. */
  guard: (ctx: RequestContext) => AuthGuard;
  /** Takes the workspace's share of the API (its rate and concurrency limits) for a request of its session. */
  admit: (ctx: RequestContext, workspaceId: string) => Promise<void>;
  /** Other master keys than the environment's (tests). */
  keyring?: KeyringOptions;
}

/** The value of the cookie `name` in a Cookie header, if there is exactly one. */
function sessionToken(cookieHeader: string | undefined, name: string): string | undefined {
  const values = (cookieHeader ?? '')
    .split(';')
    .map((part) => part.trim())
    .filter((part) => part.startsWith(`${name}=`));
  return values.length === 1 ? values[0].slice(name.length + 1) : undefined;
}

/** The Content-Security-Policy of every /portal answer: this origin only, nothing inline, framed only where allowed. */
export function portalContentSecurityPolicy(frameAncestors: readonly string[]): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "form-action 'self'",
    "base-uri 'none'",
    `frame-ancestors ${frameAncestors.length > 0 ? frameAncestors.join(' ') : "'none'"}`,
  ].join('; ');
}

/** The session cookie's name and attributes, as the public URL's scheme and the framing setting decide them. */
function sessionCookies(settings: PortalSettings) {
  // Embedded by another site (not only framed by itself): the cookie must then be a third party's.
  const embeddable = settings.frameAncestors.some((origin) => origin !== "'self'");
  const https = settings.publicUrl.startsWith('https:');
  const name = https ? PORTAL_HOST_COOKIE : PORTAL_COOKIE;
  const attributes = `Path=${https ? '/' : '/portal/'}; HttpOnly; ${embeddable ? 'SameSite=None; Secure; Partitioned' : `SameSite=Lax${https ? '; Secure' : ''}`}`;
  return {
    embeddable,
    name,
    /** The session's cookie for as long as the browser session (the server decides when the session ends), or its removal. */
    cookie: (token: string | undefined) =>
      token === undefined
        ? `${name}=; ${attributes.replace('HttpOnly', 'Max-Age=0; HttpOnly')}`
        : `${name}=${token}; ${attributes}`,
  };
}

/** The sessions' CSRF tokens: an HMAC of the session id under each key derived from the API secret (the first signs).*/
function csrfTokens(keyring: KeyringOptions | undefined) {
  const csrfKeys = derivedKeys(CSRF_KEY_LABEL, keyring);
  const token = (sessionId: string, key = csrfKeys[0]) =>
    crypto.createHmac('sha256', key).update(sessionId).digest('base64url');
  const holds = (sessionId: string, given: string) =>
    csrfKeys.some((key) => {
      const expected = Buffer.from(token(sessionId, key));
      const actual = Buffer.from(given);
      return actual.length === expected.length && crypto.timingSafeEqual(actual, expected);
    });
  return { token: (sessionId: string) => token(sessionId), holds };
}

/** What the screen's parts share: its connections and clock, its cookie, CSRF tokens, guard and sessions. */
interface Screen {
  db: Knex;
  clock: () => Date;
  cookies: ReturnType<typeof sessionCookies>;
  csrf: ReturnType<typeof csrfTokens>;
  /** The request's guard: its address as the listener works it out, the screen's budget (reported in its RateLimit fields). */
  guardOf: (ctx: RequestContext) => AuthGuard;
  /**
   * The session of the request's cookie (undefined without one), or a CredentialError (the documented 401). A cookie
   * that is no session's counts against the address, as a wrong API key does; no cookie at all does not (any site can make a browser send
   * a request without it, and it costs no look-up), nor does a session that has ended or expired (it was real; and
   * another site can make the browser that holds it send it), which is no longer known good either: refused at once
   * when the address has failed too often.
   */
  sessionOf: (ctx: RequestContext) => Promise<PortalSessionHolder | undefined>;
  authenticateSession: (ctx: RequestContext) => Promise<PortalSessionHolder>;
  /** A change must come with the session's CSRF token (signing out included). */
  requireCsrf: (ctx: RequestContext, session: PortalSessionHolder) => void;
}

function screenOf(options: PortalOptions): Screen {
  const { db, clock, settings } = options;
  const cookies = sessionCookies(settings);
  const csrf = csrfTokens(options.keyring);
  /** The screen's own failure budget per client address: links and session cookies, never the API's keys. */
  const screenLimits = new AuthFailureLimits({ perMinute: settings.authFailuresPerMinute, trustedProxies: [] });
  const guardOf = (ctx: RequestContext): AuthGuard => {
    const current = ctx.state.guard;
    if (current?.limits === screenLimits) return current;
    return (ctx.state.guard = { limits: screenLimits, address: options.guard(ctx).address });
  };
  const sessionOf = async (ctx: RequestContext): Promise<PortalSessionHolder | undefined> => {
    const token = sessionToken(ctx.get('cookie') || undefined, cookies.name);
    if (token === undefined) return undefined;
    const guard = guardOf(ctx);
    const hashText = hashApiKey(token).toString('base64');
    return guardedLookup(guard, hashText, () => portalSessionHolder(db, token, clock()), ['ended', 'expired']);
  };
  const authenticateSession = async (ctx: RequestContext): Promise<PortalSessionHolder> => {
    const session = await sessionOf(ctx);
    if (!session) throw new CredentialError('portal_session', 'missing');
    return session;
  };
  const requireCsrf = (ctx: RequestContext, session: PortalSessionHolder) => {
    const given = ctx.get('x-csrf-token');
    if (!given || !csrf.holds(session.id, given))
      throw apiError('forbidden', "A change needs the session's CSRF token in X-CSRF-Token.", { reason: 'csrf' });
  };
  return { db, clock, cookies, csrf, guardOf, sessionOf, authenticateSession, requireCsrf };
}

/**
 * A write of the session: its CSRF token must come with it, and a read-only session, or any session of a workspace
 * the platform froze, writes nothing (it shows everything until the workspace is active again).
 */
async function allowWrite({ db, requireCsrf }: Screen, ctx: RequestContext, session: PortalSessionHolder) {
  if (ctx.method === 'GET' || ctx.method === 'HEAD') return;
  requireCsrf(ctx, session);
  if (session.readOnly)
    throw apiError('forbidden', 'This session is read-only: it shows everything and changes nothing.', {
      reason: 'read_only',
    });
  if ((await findWorkspace(db, { id: session.workspaceId })).status === 'frozen') {
    throw apiError(
      'forbidden',
      'This workspace is frozen by the platform: the screen shows everything and changes nothing until it is active again.',
      { reason: 'frozen' },
    );
  }
}

/** The admin document's operations that list the `portalSession` scheme, under /portal/api, as the session's. */
function screenOperations(screen: Screen, options: PortalOptions): Promise<RequestMiddleware> {
  return adminRouter({
    db: screen.db,
    clock: screen.clock,
    cursors: options.cursors,
    scheme: 'portalSession',
    prefix: API_PREFIX,
    authenticate: async (ctx) => {
      const session = await screen.authenticateSession(ctx);
      await allowWrite(screen, ctx, session);
      await options.admit(ctx, session.workspaceId);
      return {
        caller: { id: session.id, name: 'settings screen', workspaceId: session.workspaceId, screen: true },
        audit: portalAudit(session, ctx.response.get('x-request-id'), ctx.state.clientRequestId),
      };
    },
  });
}

/** The body of /portal/api/session: the session, its workspace and its CSRF token. */
async function sessionBody({ db, csrf }: Screen, session: PortalSessionHolder) {
  const workspace = await findWorkspace(db, { id: session.workspaceId });
  return {
    id: session.id,
    // (as a session sees it: never the operator's settings)
    workspace: toWorkspaceView({ kind: 'workspace' }, workspace),
    readOnly: session.readOnly,
    csrfToken: csrf.token(session.id),
    expiresAt: session.expiresAt.toISOString(),
    idleExpiresAt: session.idleExpiresAt.toISOString(),
    idleTimeoutMinutes: PORTAL_IDLE_MINUTES,
  };
}

/** POST /portal/api/session: opens a link, in place of the browser's live session (asked first if another workspace's). */
async function openLink(screen: Screen, ctx: RequestContext): Promise<void> {
  const { db, clock, guardOf } = screen;
  ctx.state.operationId = 'startPortalSession';
  const body = await readJsonBody(ctx);
  const { key, replace } = (body ?? {}) as { key?: unknown; replace?: unknown };
  if (
    body === null ||
    typeof body !== 'object' ||
    Array.isArray(body) ||
    Object.keys(body).some((k) => k !== 'key' && k !== 'replace')
  ) {
    throw invalidRequest(
      'body',
      'Send {"key": "<the key of the link>"}, and "replace": true to replace the session of another workspace.',
    );
  }
  if (typeof key !== 'string' || key.length < 1 || key.length > 200)
    throw invalidRequest('key', "key must be the link's key, 1 to 200 characters.");
  if (replace !== undefined && typeof replace !== 'boolean')
    throw invalidRequest('replace', 'replace must be true or false.');
  // The session the browser holds already, if it is live: replaced by the link's (asked first if another workspace's).
  const open = await screen.sessionOf(ctx).catch((err) => {
    if (err instanceof CredentialError) return undefined;
    throw err;
  });
  const requestId = ctx.response.get('x-request-id');
  let started: Awaited<ReturnType<typeof startPortalSession>>;
  try {
    // (a key was given: the look-up answers a session or throws)
    started = (await guardedLookup(guardOf(ctx), hashApiKey(key).toString('base64'), () =>
      startPortalSession(db, key, clock(), { requestId, open, replace }),
    ))!;
  } catch (err) {
    if (!(err instanceof OtherWorkspaceOpenError)) throw err;
    // The documented 409, with both workspaces named for the person to confirm.
    const refusal = coreError(err)!;
    ctx.status = refusal.status;
    ctx.body = {
      ...errorBody(refusal, requestId),
      openWorkspace: err.openWorkspace,
      linkWorkspace: err.linkWorkspace,
    };
    return;
  }
  // Its cookie is good from the first request on, whatever the address's failures meanwhile.
  guardOf(ctx).limits.authenticated(hashApiKey(started.token).toString('base64'));
  ctx.set('Set-Cookie', screen.cookies.cookie(started.token));
  ctx.status = 201;
  ctx.body = await sessionBody(screen, started.session);
}

/** POST, GET and DELETE /portal/api/session: opening a link, reading the session, signing out. */
async function sessionRoute(screen: Screen, ctx: RequestContext): Promise<void> {
  const { db, clock } = screen;
  if (ctx.method === 'POST') return openLink(screen, ctx);
  if (ctx.method === 'GET' || ctx.method === 'HEAD') {
    ctx.state.operationId = 'getPortalSession';
    ctx.body = await sessionBody(screen, await screen.authenticateSession(ctx));
    return;
  }
  if (ctx.method === 'DELETE') {
    ctx.state.operationId = 'signOutPortalSession';
    const held = await screen.authenticateSession(ctx);
    screen.requireCsrf(ctx, held);
    const audit = portalAudit(held, ctx.response.get('x-request-id'), ctx.state.clientRequestId);
    await endPortalSessions(
      db,
      { kind: 'workspace', workspaceId: held.workspaceId, audit },
      { workspaceId: held.workspaceId, sessionId: held.id, now: clock() },
    );
    ctx.set('Set-Cookie', screen.cookies.cookie(undefined));
    ctx.status = 204;
    return;
  }
  throw apiError('method_not_allowed', `This path does not accept ${ctx.method}.`, {
    headers: { Allow: 'GET, HEAD, POST, DELETE' },
  });
}

/** The screen's page and files, by GET or HEAD: `/portal` redirects to `/portal/`, any other path is the page. */
function serveAssets(assets: Map<string, Asset>): (ctx: RequestContext) => void {
  const page = assets.get('index.html');
  return (ctx) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') throw noRoute();
    if (ctx.path === '/portal') {
      ctx.redirect('/portal/');
      return;
    }
    const asset = ctx.path.startsWith(ASSETS_PREFIX)
      ? assets.get(ctx.path.slice(ASSETS_PREFIX.length))
      : ctx.path.startsWith(API_PREFIX)
        ? undefined
        : page;
    if (!asset) throw noRoute();
    // Files change only with a deployment: revalidated each time, sent again only when changed.
    ctx.set({ 'Cache-Control': 'no-cache', ETag: asset.etag });
    if (ctx.get('if-none-match') === asset.etag) {
      ctx.status = 304;
      return;
    }
    ctx.type = asset.type;
    ctx.body = asset.body;
  };
}

/** The /portal routes: the middleware answers a request under /portal (main mounts it there, beside the API). */
export async function createPortal(options: PortalOptions): Promise<RequestMiddleware> {
  const screen = screenOf(options);
  const operations = await screenOperations(screen, options);
  const assets = serveAssets(loadAssets());
  const csp = portalContentSecurityPolicy(options.settings.frameAncestors);
  return async (ctx, next) => {
    ctx.set({
      'Content-Security-Policy': csp,
      'Referrer-Policy': 'no-referrer',
      'Cross-Origin-Opener-Policy': 'same-origin',
    });
    if (!screen.cookies.embeddable) ctx.set('X-Frame-Options', 'DENY');
    if (ctx.path === `${API_PREFIX}/session`) return sessionRoute(screen, ctx);
    if (ctx.path.startsWith(`${API_PREFIX}/`)) return operations(ctx, next);
    return assets(ctx);
  };
}
