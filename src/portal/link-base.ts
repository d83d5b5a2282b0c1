import fs from 'node:fs';
import path from 'node:path';
import type { PortalSettings } from './settings.js';

// Where the settings screen's links point when FRS_PUBLIC_URL does not say: the public listener as this machine
// reaches it, on the port it really listens on. The service records it in the data folder when its listener is up, so
// that `fleet-admin portal link`, run from another shell (without the server's PORT), links to that same listener.

/** The file, in the data folder, that holds the base URL of the last listener started on it. */
export function linkBaseFile(dataDir: string): string {
  return path.join(dataDir, 'portal-link-base');
}

/** The service's links' base: FRS_PUBLIC_URL, else http://localhost:<the port its public listener listens on>. */
export function serverLinkBase(settings: PortalSettings, listeningPort: number): string {
  return settings.publicUrlGiven ? settings.publicUrl : `http://localhost:${listeningPort}`;
}

/**
 * Records the service's links' base for the CLI. Best effort: a data folder that cannot be written (a read-only one
 * beside a DATABASE_URL) leaves the CLI on its own setting, FRS_PUBLIC_URL or PORT.
 */
export function recordLinkBase(base: string, dataDir: string): void {
  try {
    fs.mkdirSync(dataDir, { recursive: true });
    fs.writeFileSync(linkBaseFile(dataDir), `${base}\n`);
  } catch {
    // (see above)
  }
}

/** The CLI's links' base: FRS_PUBLIC_URL, else the one the last service on this data folder recorded, else PORT's. */
export function cliLinkBase(settings: PortalSettings, dataDir: string): string {
  if (settings.publicUrlGiven) return settings.publicUrl;
  try {
    const recorded = fs.readFileSync(linkBaseFile(dataDir), 'utf8').trim();
    if (/^http:\/\/localhost:\d{1,5}$/.test(recorded)) return recorded;
  } catch {
    // (no service started on this data folder yet)
  }
  return settings.publicUrl;
}
