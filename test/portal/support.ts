import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { createApp, listen } from '../../src/api/app.js';
import { createPortal } from '../../src/portal/app.js';
import { DEFAULT_PORTAL_AUTH_FAILURE_LIMIT } from '../../src/portal/settings.js';
import type { AuthFailureSettings } from '../../src/api/auth-failures.js';
import { processConfig } from '../../src/config.js';
import { createAdminToken } from '../../src/core/admin-tokens.js';
import { cliAudit } from '../../src/core/audit.js';
import { testDatabase } from '../support/database.js';
import { expectAdminDocumented, startAdminApiAt, type TestAdminApi } from '../admin/support.js';
import { capturedLogger } from '../support/logs.js';
import { operatorWith } from '../support/actors.js';

// The settings screen as its tests meet it: the public listener with the screen (as the API's and the admin API's
// database roles, as main runs it), the admin API whose links point at it, and a request helper that checks every
// answer of /portal/api against the admin document (the screen's operations are the admin document's).

export const PORTAL_API = '/portal/api';

/** An answer of the screen's API checked against the admin document (its admin paths under /portal/api). */
export function expectPortalDocumented(
  method: string,
  path: string,
  response: { status: number; headers: Headers; body: unknown },
): void {
  const documentPath = path.startsWith(`${PORTAL_API}/admin/`) ? path.slice(PORTAL_API.length) : path;
  expectAdminDocumented(method, documentPath, response, 'portalSession');
}

export interface ScreenResponse {
  status: number;
  headers: Headers;
  text: string;
  body: any;
}

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
  ): Promise<ScreenResponse>;
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
  const app = await createApp({
    db: database.forRole('api'),
    logger,
    clock: options.clock,
    limits,
    portal: (edge) =>
      createPortal({
        ...edge,
        db: database.forRole('admin'),
        settings: {
          publicUrl: options.publicUrl ?? 'http://127.0.0.1',
          frameAncestors: options.frameAncestors ?? [],
          authFailuresPerMinute: options.screenAuthFailures ?? DEFAULT_PORTAL_AUTH_FAILURE_LIMIT,
        },
      }),
  });
  const server: Server = await listen(app, 0, '127.0.0.1');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const admin = await startAdminApiAt({ clock: options.clock, portalUrl: url });
  const { token: adminToken } = await createAdminToken(database.db, operatorWith(cliAudit()), {
    name: 'platform backend',
    workspaceId: 'every',
  });

  const request: TestScreen['request'] = async (method, path, { cookie, csrf, body, headers = {} } = {}) => {
    const res = await fetch(url + path, {
      method,
      headers: {
        ...(cookie ? { cookie } : {}),
        ...(csrf ? { 'x-csrf-token': csrf } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
      redirect: 'manual',
    });
    const text = await res.text();
    const json = (res.headers.get('content-type') ?? '').startsWith('application/json');
    const response = {
      status: res.status,
      headers: res.headers,
      text,
      body: json && text ? JSON.parse(text) : undefined,
    };
    if (path.startsWith(`${PORTAL_API}/`) && method !== 'HEAD') expectPortalDocumented(method, path, response);
    return response;
  };
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
