// The workspace's API settings screen, served on the public listener under /portal/ (the staff's browsers reach the
// public address; the admin listener stays on 127.0.0.1). It is the third client of the core: its pages
// (src/portal/assets/, plain ES modules, no build step) call the admin document's operations that list the
// `portalSession` scheme, at /portal/api + their path, through the same dispatcher as the admin listener
// (src/admin/app.ts), with a session in place of an admin token. What a session is lives in src/portal-sessions.ts.
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
import type Koa from 'koa';
import { adminDispatcher, noRoute, readJsonBody, type AdminDispatcher } from '../admin/app.js';
import { guardedLookup } from '../admin/auth.js';
import { ApiError, invalidRequest } from '../api/errors.js';
import type { AuthGuard } from '../api/auth.js';
import type { Cursors } from '../api/cursors.js';
import { derivedKeys, hashApiKey, type KeyringOptions } from '../secrets.js';
import { findWorkspace } from '../workspaces.js';
import {
  endPortalSessions, PORTAL_IDLE_MINUTES, portalAudit, portalSessionHolder, startPortalSession, type PortalSessionHolder,
} from '../portal-sessions.js';
import type { PortalSettings } from './settings.js';

export const PORTAL_COOKIE = 'frs_portal';
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
    assets.set(name, { body, type, etag: `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` });
  }
  return assets;
}

/** What the public listener lends the screen (src/api/app.ts's ListenerEdge), and what main gives it. */
export interface PortalOptions {
  /** Connections as the admin API's database role: the screen changes what the admin API changes. */
  db: Knex;
  settings: PortalSettings;
  clock: () => Date;
  cursors: Cursors;
  /** The client address's failure limit, as for API keys. */
  guard: (ctx: Koa.Context) => AuthGuard;
  /** Takes the workspace's share of the API (its rate and concurrency limits) for a request of its session. */
  admit: (ctx: Koa.Context, workspaceId: string) => Promise<void>;
  /** Other master keys than the environment's (tests). */
  keyring?: KeyringOptions;
}

const unauthorized = (reason: string, message: string) => new ApiError(401, 'unauthorized', message, reason);

/** The session cookie's value in a Cookie header, if there is exactly one. */
function sessionToken(cookieHeader: string | undefined): string | undefined {
  const values = (cookieHeader ?? '').split(';').map((part) => part.trim()).filter((part) => part.startsWith(`${PORTAL_COOKIE}=`));
  return values.length === 1 ? values[0].slice(PORTAL_COOKIE.length + 1) : undefined;
}

/** The Content-Security-Policy of every /portal answer: this origin only, nothing inline, framed only where allowed. */
export function portalContentSecurityPolicy(frameAncestors: readonly string[]): string {
  return [
    "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "connect-src 'self'",
    "form-action 'self'", "base-uri 'none'", `frame-ancestors ${frameAncestors.length > 0 ? frameAncestors.join(' ') : "'none'"}`,
  ].join('; ');
}

/** The /portal routes: the middleware answers a request under /portal (the caller checks the path). */
export async function createPortal(options: PortalOptions): Promise<Koa.Middleware> {
  const { db, clock, settings } = options;
  const assets = loadAssets();
  const csrfKeys = derivedKeys(CSRF_KEY_LABEL, options.keyring);
  const csrfToken = (sessionId: string, key = csrfKeys[0]) => crypto.createHmac('sha256', key).update(sessionId).digest('base64url');
  const csrfHolds = (sessionId: string, given: string) =>
    csrfKeys.some((key) => {
      const expected = Buffer.from(csrfToken(sessionId, key));
      const actual = Buffer.from(given);
      return actual.length === expected.length && crypto.timingSafeEqual(actual, expected);
    });
  // Embedded by another site (not only framed by itself): the cookie must then be a third party's.
  const embeddable = settings.frameAncestors.some((origin) => origin !== "'self'");
  const cookie = (value: string, maxAgeSeconds: number) =>
    `${PORTAL_COOKIE}=${value}; Path=/portal/; Max-Age=${maxAgeSeconds}; HttpOnly; ${embeddable ? 'SameSite=None; Secure; Partitioned' : `SameSite=Lax${settings.publicUrl.startsWith('https:') ? '; Secure' : ''}`}`;
  const csp = portalContentSecurityPolicy(settings.frameAncestors);

  /**
   * The session of the request's cookie, or the documented 401. A cookie that is no session's counts against the
   * address, as a wrong API key does; no cookie at all does not (any site can make a browser send a request without
   * it, and it costs no look-up), nor does a session that has ended or expired (it was real).
   */
  const authenticateSession = async (ctx: Koa.Context): Promise<PortalSessionHolder> => {
    const token = sessionToken(ctx.get('cookie') || undefined);
    if (token === undefined) throw unauthorized('missing', 'No settings-screen session: open a new link from your platform.');
    const held = await guardedLookup(options.guard(ctx), hashApiKey(token).toString('base64'), async () => {
      const found = await portalSessionHolder(db, token, clock());
      return found === 'unknown' ? found : { found };
    });
    if (typeof held === 'string') throw unauthorized('unknown', 'This session is not known: open a new link.');
    if (typeof held.found === 'string') throw unauthorized(held.found, `This session has ${held.found}: open a new link.`);
    return held.found;
  };

  /** A change must come with the session's CSRF token (signing out included). */
  const requireCsrf = (ctx: Koa.Context, session: PortalSessionHolder) => {
    const given = ctx.get('x-csrf-token');
    if (!given || !csrfHolds(session.id, given)) throw new ApiError(403, 'forbidden', "A change needs the session's CSRF token in X-CSRF-Token.", 'csrf');
  };

  /**
   * A write of the session: its CSRF token must come with it, and a read-only session, or any session of a workspace
   * the platform froze, writes nothing (it shows everything until the workspace is active again).
   */
  const allowWrite = async (ctx: Koa.Context, session: PortalSessionHolder) => {
    if (ctx.method === 'GET' || ctx.method === 'HEAD') return;
    requireCsrf(ctx, session);
    if (session.readOnly) throw new ApiError(403, 'forbidden', 'This session is read-only: it shows everything and changes nothing.', 'read_only');
    if ((await findWorkspace(db, { id: session.workspaceId })).status === 'frozen') {
      throw new ApiError(403, 'forbidden', 'This workspace is frozen by the platform: the screen shows everything and changes nothing until it is active again.', 'frozen');
    }
  };

  const dispatcher: AdminDispatcher = await adminDispatcher({
    db,
    clock,
    cursors: options.cursors,
    scheme: 'portalSession',
    prefix: API_PREFIX,
    authenticate: async (ctx) => {
      const session = await authenticateSession(ctx);
      await allowWrite(ctx, session);
      await options.admit(ctx, session.workspaceId);
      return {
        caller: { id: session.id, name: 'settings screen', workspaceId: session.workspaceId, screen: true },
        audit: portalAudit(session, ctx.response.get('x-request-id')),
      };
    },
  });

  const sessionBody = async (session: PortalSessionHolder) => {
    const { id, slug, status, timezone, remindersAhead } = await findWorkspace(db, { id: session.workspaceId });
    return {
      id: session.id,
      workspace: { id, slug, status, timezone, remindersAhead },
      readOnly: session.readOnly,
      csrfToken: csrfToken(session.id),
      expiresAt: session.expiresAt.toISOString(),
      idleExpiresAt: session.idleExpiresAt.toISOString(),
      idleTimeoutMinutes: PORTAL_IDLE_MINUTES,
    };
  };

  /** POST, GET and DELETE /portal/api/session: opening a link, reading the session, signing out. */
  const session: Koa.Middleware = async (ctx) => {
    if (ctx.method === 'POST') {
      ctx.state.operationId = 'startPortalSession';
      const body = await readJsonBody(ctx);
      const key = (body as { key?: unknown } | undefined)?.key;
      if (body === null || typeof body !== 'object' || Array.isArray(body) || Object.keys(body).some((k) => k !== 'key')) {
        throw invalidRequest('body', 'Send {"key": "<the key of the link>"}.');
      }
      if (typeof key !== 'string' || key.length < 1 || key.length > 200) throw invalidRequest('key', 'key must be the link\'s key, 1 to 200 characters.');
      const started = await guardedLookup(options.guard(ctx), hashApiKey(key).toString('base64'), () => startPortalSession(db, key, clock(), ctx.response.get('x-request-id')));
      if (typeof started === 'string') throw unauthorized('link', 'This link has already been used or has expired. Ask for a new one.');
      // Its cookie is good from the first request on, whatever the address's failures meanwhile.
      options.guard(ctx).limits.authenticated(hashApiKey(started.token).toString('base64'));
      ctx.set('Set-Cookie', cookie(started.token, Math.max(1, Math.floor((started.session.expiresAt.getTime() - clock().getTime()) / 1000))));
      ctx.status = 201;
      ctx.body = await sessionBody(started.session);
      return;
    }
    if (ctx.method === 'GET' || ctx.method === 'HEAD') {
      ctx.state.operationId = 'getPortalSession';
      ctx.body = await sessionBody(await authenticateSession(ctx));
      return;
    }
    if (ctx.method === 'DELETE') {
      ctx.state.operationId = 'signOutPortalSession';
      const held = await authenticateSession(ctx);
      requireCsrf(ctx, held);
      await endPortalSessions(db, { workspaceId: held.workspaceId, id: held.id }, clock(), portalAudit(held, ctx.response.get('x-request-id')));
      ctx.set('Set-Cookie', cookie('', 0));
      ctx.status = 204;
      return;
    }
    throw new ApiError(405, 'method_not_allowed', `This path does not accept ${ctx.method}.`, undefined, { Allow: 'GET, HEAD, POST, DELETE' });
  };

  const page = assets.get('index.html');
  return async (ctx) => {
    ctx.set({ 'Content-Security-Policy': csp, 'Referrer-Policy': 'no-referrer', 'Cross-Origin-Opener-Policy': 'same-origin' });
    if (!embeddable) ctx.set('X-Frame-Options', 'DENY');
    if (ctx.path === `${API_PREFIX}/session`) return session(ctx, async () => undefined);
    if (ctx.path.startsWith(`${API_PREFIX}/`)) return dispatcher.handle(ctx);
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') throw noRoute();
    if (ctx.path === '/portal') {
      ctx.redirect('/portal/');
      return;
    }
    const asset = ctx.path.startsWith(ASSETS_PREFIX) ? assets.get(ctx.path.slice(ASSETS_PREFIX.length)) : ctx.path.startsWith(API_PREFIX) ? undefined : page;
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
