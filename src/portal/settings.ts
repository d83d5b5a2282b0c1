import { wholeNumberDefault, type PortalSettings } from '../config.js';

// Where the settings screen is reached and who may embed it: settings of the environment (src/config.ts,
// portalSettingsFromEnv), checked at start: a bad value stops the service with one line naming the variable.

export const PORTAL_AUTH_FAILURE_LIMIT_ENV = 'FRS_PORTAL_AUTH_FAILURE_LIMIT';
export const ALLOW_HTTP_PUBLIC_URL_ENV = 'FRS_ALLOW_HTTP_PUBLIC_URL';
/** Failed link openings and unknown session cookies a minute per client address, by default. */
export const DEFAULT_PORTAL_AUTH_FAILURE_LIMIT = wholeNumberDefault(PORTAL_AUTH_FAILURE_LIMIT_ENV);

export type { PortalSettings };
