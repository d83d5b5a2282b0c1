import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { publicApi, publicListener } from '../../src/api/app.js';
import { listen } from '../../src/http/edge.js';
import { createPortal } from '../../src/portal/app.js';
import { DEFAULT_PORTAL_AUTH_FAILURE_LIMIT } from '../../src/portal/settings.js';
import type { AuthFailureSettings } from '../../src/http/auth-failures.js';
import { processConfig } from '../../src/config.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { cliAudit } from '../../src/core/audit.js';
import { testDatabase } from '../support/database.js';
import { startAdminApiAt, type TestAdminApi } from '../admin/support.js';
import { documentedClient, SCREEN_API, type ApiResponse } from '../support/http.js';
import { capturedLogger } from '../support/logs.js';
import { operatorWith } from '../support/actors.js';

// The settings screen as its tests meet it: the public listener with the screen (as the API's and the admin API's
// database roles, as main runs it), the admin API whose links point at it, and a request helper that checks every
// answer of /portal/api against the admin document (the screen's operations are the admin document's).

export const PORTAL_API = SCREEN_API.prefix;

export interface TestScreen {
  /** The public listener's base URL. */
  url: string;
  admin: TestAdminApi;
  /** An admin token acting on every workspace. */
  adminToken: string;
  logs: Array<Record<string, unknown>>;
  /** A request to the public listener; a JSON answer under /portal/api is checked against the admin document. */
  request(
    method: string,
    path: string,
    options?: { cookie?: string; csrf?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
  /** A new link of `workspaceId` made through the admin API (with `token`, by default adminToken); its key. */
  link(
    workspaceId: string,
    options?: { expiresInMinutes?: number; readOnly?: boolean; token?: string },
  ): Promise<{ id: string; url: string; key: string }>;
  /** Opens a link as the screen does: the session's cookie (name=value) and its body. */
  open(key: string): Promise<{ cookie: string; session: any; setCookie: string }>;
  close(): Promise<void>;
}

export async function startScreen(
  options: {
    clock?: () => Date;
    frameAncestors?: string[];
    /** The public API's failure limit. */
    authFailures?: AuthFailureSettings;
    /** The screen's own (FRS_PORTAL_AUTH_FAILURE_LIMIT). */
    screenAuthFailures?: number;
    /** The address the links point at (FRS_PUBLIC_URL): its scheme decides the cookie; requests still go to the listener. */
    publicUrl?: string;
  } = {},
): Promise<TestScreen> {
  const database = await testDatabase();
  const { logger, logs } = capturedLogger();
  const limits = options.authFailures
    ? { workspace: processConfig().workspaceLimits, authFailures: options.authFailures }
    : undefined;
  // As main serves them: the public API, and the screen mounted beside it under /portal.
  const api = await publicApi({ db: database.forRole('api'), logger, clock: options.clock, limits });
  const screen = await createPortal({
    ...api.edge,
    db: database.forRole('admin'),
    settings: {
      publicUrl: options.publicUrl ?? 'http://127.0.0.1',
      frameAncestors: options.frameAncestors ?? [],
      authFailuresPerMinute: options.screenAuthFailures ?? DEFAULT_PORTAL_AUTH_FAILURE_LIMIT,
    },
  });
  const app = publicListener(api, { logger, beside: [{ prefix: '/portal', serve: screen }] });
  const server: Server = await listen(app, 0, '127.0.0.1');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const admin = await startAdminApiAt({ clock: options.clock, portalUrl: url });
  const { token: adminToken } = await createAdminToken(database.db, operatorWith(cliAudit()), {
    name: 'platform backend',
    workspaceId: 'every',
  });

  const client = documentedClient({ ...SCREEN_API, baseUrl: url });
  const request: TestScreen['request'] = (method, path, { cookie, csrf, body, headers = {} } = {}) =>
    client.request(method, path, {
      headers: { ...(cookie ? { cookie } : {}), ...(csrf ? { 'x-csrf-token': csrf } : {}), ...headers },
      body,
    });
  return {
    url,
    admin,
    adminToken,
    logs,
    request,
    async link(workspaceId, { token = adminToken, ...linkOptions } = {}) {
      const res = await admin.request('POST', `/admin/v1/workspaces/${workspaceId}/portal-sessions`, {
        token,
        body: linkOptions,
      });
      if (res.status !== 201)
        throw new Error(`createPortalSession answered ${res.status}: ${JSON.stringify(res.body)}`);
      return { id: res.body.id, url: res.body.url, key: new URL(res.body.url).hash.replace(/^#key=/, '') };
    },
    async open(key) {
      const res = await request('POST', `${PORTAL_API}/session`, { body: { key } });
      if (res.status !== 201) throw new Error(`opening the link answered ${res.status}: ${res.text}`);
      const setCookie = res.headers.get('set-cookie')!;
      return { cookie: setCookie.split(';')[0], session: res.body, setCookie };
    },
    async close() {
      await admin.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
