// The settings screen's calls: the portal session (/portal/api/session) and the admin API's operations for this
// session's workspace (/portal/api + the admin path). The session cookie is HttpOnly and goes by itself
// (same-origin credentials); the CSRF token lives in this module only and goes with every write.

/** @typedef {{ id: string, slug: string, status: string, timezone: string, remindersAhead: number }} Workspace */
/** @typedef {{ id: string, workspace: Workspace, readOnly: boolean, csrfToken: string, expiresAt: string, idleExpiresAt: string, idleTimeoutMinutes: number }} Session */

/** An error answer of the API: its status and the body's `code`, `message`, `reason`. */
export class ApiError extends Error {
  constructor(status, body, headers) {
    const error = body?.error ?? {};
    super(error.message || `The service answered ${status}.`);
    this.status = status;
    this.code = error.code;
    this.reason = error.reason;
    this.requestId = error.requestId;
    /** The whole body (a 409 of the session call names the two workspaces beside `error`). */
    this.body = body;
    /** Seconds the answer's Retry-After asks to wait (429, 503), or undefined. */
    const retryAfter = Number.parseInt(headers?.get('retry-after') ?? '', 10);
    this.retryAfter = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined;
  }
}

/** @type {Session|null} */
let session = null;
let csrfToken = null;
const endedListeners = [];

/** Calls `listener` once the session has ended (a 401 from any call). */
export function onSessionEnded(listener) {
  endedListeners.push(listener);
}

export const currentSession = () => session;

let answeredAt = 0;
/** When the server last answered a call (any status): the session's idle limit runs from about then. */
export const lastAnswered = () => answeredAt;

async function call(method, path, body) {
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrfToken) headers['x-csrf-token'] = csrfToken;
  const response = await fetch(path, {
    method,
    headers,
    credentials: 'same-origin',
    cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  answeredAt = Date.now();
  const text = await response.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!response.ok) throw new ApiError(response.status, json, response.headers);
  return json;
}

const unauthorized = (err) => err instanceof ApiError && err.status === 401;

/**
 * Starts a session with the one-time key of the link (201), or finds the current one (200). A refused key falls back
 * to the session the cookie already holds (a frame re-created with the same link while its session lives). Null when
 * there is none (401): `refused` tells a refused key from no session at all. When the browser holds a session of
 * another workspace, the link is not opened unless `replace` (the person confirmed): `conflict` names both workspaces.
 * @param {string|undefined} key
 * @param {{replace?: boolean}} [options]
 * @returns {Promise<{session: Session|null, refused: boolean, conflict?: {openWorkspace: {slug: string}, linkWorkspace: {slug: string}}}>}
 */
export async function startSession(key, { replace = false } = {}) {
  let refused = false;
  if (key) {
    try {
      session = await call('POST', '/portal/api/session', replace ? { key, replace: true } : { key });
    } catch (err) {
      if (err instanceof ApiError && err.status === 409 && err.body?.linkWorkspace) {
        return {
          session: null,
          refused: false,
          conflict: { openWorkspace: err.body.openWorkspace, linkWorkspace: err.body.linkWorkspace },
        };
      }
      if (!unauthorized(err)) throw err;
      refused = true;
    }
  }
  if (!session) {
    try {
      session = await call('GET', '/portal/api/session');
    } catch (err) {
      if (unauthorized(err)) return { session: null, refused };
      throw err;
    }
  }
  csrfToken = session.csrfToken;
  return { session, refused: false };
}

/**
 * Ends the session: the server confirmed (204) or it had ended already (401). Any other answer throws and the page
 * keeps its session (the server may still hold it).
 */
export async function endSession() {
  try {
    await call('DELETE', '/portal/api/session');
  } catch (err) {
    if (!unauthorized(err)) throw err;
  }
  session = null;
  csrfToken = null;
}

/**
 * An admin operation on this session's workspace: `admin('GET', '/endpoints')` →
 * GET /portal/api/admin/v1/workspaces/{id}/endpoints. A 401 ends the session on the page.
 * @param {'GET'|'POST'|'PATCH'|'DELETE'} method
 * @param {string} path after the workspace ('' for the workspace itself)
 * @param {unknown} [body]
 */
export async function admin(method, path, body) {
  try {
    return await call(
      method,
      `/portal/api/admin/v1/workspaces/${encodeURIComponent(session.workspace.id)}${path}`,
      body,
    );
  } catch (err) {
    // A 401 after signing out (an answer still on its way) is no news: the page says it is signed out already.
    if (unauthorized(err) && session) {
      session = null;
      csrfToken = null;
      for (const listener of endedListeners) listener();
    }
    throw err;
  }
}

/** Updates the session's copy of the workspace (after the settings are saved). */
export function setWorkspace(workspace) {
  session.workspace = { ...session.workspace, ...workspace };
}

/** A query string from the defined, non-empty values. */
export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params))
    if (value !== undefined && value !== null && value !== '') search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** @typedef {{ event: string, group: string, summary: string, description: string, exampleData: object }} EventType */
/** @type {Promise<EventType[]>|null} */
let catalogue = null;

/** The event catalogue (listEventTypes), fetched once per page load: it changes only with a new release. */
export function eventTypes() {
  catalogue ??= admin('GET', '/event-types').then(
    (list) => list.rows,
    (err) => {
      catalogue = null;
      throw err;
    },
  );
  return catalogue;
}

/** The catalogue's events grouped as it groups them, in its order: [[group, [EventType...]]...]. */
export function grouped(types) {
  const groups = new Map();
  for (const type of types) groups.set(type.group, [...(groups.get(type.group) ?? []), type]);
  return [...groups];
}
