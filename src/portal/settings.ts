import { ConfigError, envSwitch, wholeNumberSetting } from '../config.js';

// Where the settings screen is reached and who may embed it, from the environment. Each is checked at start: a bad
// value stops the service with one line naming the variable.

export const PORTAL_AUTH_FAILURE_LIMIT_ENV = 'FRS_PORTAL_AUTH_FAILURE_LIMIT';
export const ALLOW_HTTP_PUBLIC_URL_ENV = 'FRS_ALLOW_HTTP_PUBLIC_URL';
/** Failed link openings and unknown session cookies a minute per client address, by default. */
export const DEFAULT_PORTAL_AUTH_FAILURE_LIMIT = 30;

export interface PortalSettings {
  /** The public listener's base URL as the staff's browsers reach it (scheme, host, port; no path): the links' base. */
  publicUrl: string;
  /** Whether FRS_PUBLIC_URL gave it (else it is this machine's PORT: see src/portal/link-base.ts). */
  publicUrlGiven?: boolean;
  /** Origins allowed to show the screen in a frame (CSP frame-ancestors); none by default. */
  frameAncestors: string[];
  /**
   * The screen's own budget of failed authentications a minute per client address (0: none), apart from the public
   * API's: a key-less API request, which any web page can make a browser send, must not lock staff out of the screen.
   */
  authFailuresPerMinute: number;
}

/** An origin a frame-ancestors list may name: scheme and host (a leading `*.` allowed), an optional port; or 'self'. */
const FRAME_ANCESTOR = /^(?:'self'|https?:\/\/(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::\d{1,5})?)$/i;

export function portalSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): PortalSettings {
  const given = env.FRS_PUBLIC_URL?.trim() || `http://localhost:${env.PORT || 3000}`;
  let url: URL;
  try {
    url = new URL(given);
  } catch {
    throw new ConfigError(`FRS_PUBLIC_URL must be the public listener's base URL, such as https://api.example.com, got "${given}"`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.pathname !== '/' || url.search || url.hash || url.username || url.password) {
    throw new ConfigError(`FRS_PUBLIC_URL must be an http(s) origin with no path, query or credentials, such as https://api.example.com, got "${given}"`);
  }
  const frameAncestors = (env.FRS_PORTAL_FRAME_ANCESTORS ?? '').split(/[\s,]+/).filter(Boolean);
  for (const origin of frameAncestors) {
    if (!FRAME_ANCESTOR.test(origin)) {
      throw new ConfigError(
        `FRS_PORTAL_FRAME_ANCESTORS lists the origins that may embed the settings screen, such as https://app.example.com (space- or comma-separated), got "${origin}"`,
      );
    }
  }
  // Over plain http beyond this machine, the screen's session cookie and the links' keys cross the network readable
  // (and the cookie can have no `__Host-` name): refused unless an operator says so, knowingly.
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  const allowHttp = envSwitch(ALLOW_HTTP_PUBLIC_URL_ENV, env) ?? false;
  if (url.protocol === 'http:' && !loopback && !allowHttp) {
    throw new ConfigError(
      `FRS_PUBLIC_URL must be https for an address other than this machine's (the settings screen's cookie and links would cross the network in clear), got "${given}"; set ${ALLOW_HTTP_PUBLIC_URL_ENV}=1 to allow it anyway`,
    );
  }
  // Embedded by another site, the session cookie must be `Secure`, which a browser keeps only from https (or localhost).
  if (frameAncestors.some((origin) => origin !== "'self'") && url.protocol === 'http:' && !loopback) {
    throw new ConfigError(
      `FRS_PORTAL_FRAME_ANCESTORS lets other sites embed the settings screen, whose cookie must then be Secure: set FRS_PUBLIC_URL to the https address browsers reach (got "${given}")`,
    );
  }
  const authFailuresPerMinute = wholeNumberSetting(PORTAL_AUTH_FAILURE_LIMIT_ENV, DEFAULT_PORTAL_AUTH_FAILURE_LIMIT, { min: 0, max: 1_000_000, zero: 'off' }, env);
  return { publicUrl: url.origin, publicUrlGiven: Boolean(env.FRS_PUBLIC_URL?.trim()), frameAncestors, authFailuresPerMinute };
}
