import { ConfigError } from '../config.js';

// Where the settings screen is reached and who may embed it, from the environment. Both are checked at start: a bad
// value stops the service with one line naming the variable.

export interface PortalSettings {
  /** The public listener's base URL as the staff's browsers reach it (scheme, host, port; no path): the links' base. */
  publicUrl: string;
  /** Origins allowed to show the screen in a frame (CSP frame-ancestors); none by default. */
  frameAncestors: string[];
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
  // Embedded by another site, the session cookie must be `Secure`, which a browser keeps only from https (or localhost).
  const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  if (frameAncestors.some((origin) => origin !== "'self'") && url.protocol === 'http:' && !loopback) {
    throw new ConfigError(
      `FRS_PORTAL_FRAME_ANCESTORS lets other sites embed the settings screen, whose cookie must then be Secure: set FRS_PUBLIC_URL to the https address browsers reach (got "${given}")`,
    );
  }
  return { publicUrl: url.origin, frameAncestors };
}
