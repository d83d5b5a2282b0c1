// The reference page at /docs: Scalar's API reference, served from node_modules with everything it needs, so it
// works with no network at all (no CDN, no web fonts, no proxy). A reader can enter an API key, send any request to
// this very server and see the answer, and every operation shows request samples (curl among them).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type Router from '@koa/router';

const require = createRequire(import.meta.url);
const SCALAR_BUNDLE = require.resolve('@scalar/api-reference/browser/standalone.js');

/** A car on a road, in the brand's teal: the favicon, inline so it needs no file of its own. */
const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#0f766e"/>\
<path d="M7 19l2.2-6.2A2 2 0 0 1 11.1 11.5h9.8a2 2 0 0 1 1.9 1.3L25 19v5h-3v-2H10v2H7z" fill="#fff"/>\
<circle cx="11" cy="19.5" r="1.5" fill="#0f766e"/><circle cx="21" cy="19.5" r="1.5" fill="#0f766e"/></svg>`;

/**
 * Scalar's configuration. Requests from "try it" go to the origin the page was loaded from (whatever the document's
 * `servers` say), directly: no proxy. The system font stack stands in for Scalar's web fonts.
 */
/** What differs between the two listeners' reference pages (the public API's, the admin API's). */
export interface DocsOptions {
  title: string;
  /** The document's security scheme the page asks a credential for. */
  securityScheme: string;
}

const PUBLIC_DOCS: DocsOptions = { title: 'Fleet Rental Service API', securityScheme: 'bearerAuth' };

const configuration = ({ title, securityScheme }: DocsOptions) => ({
  url: '/openapi.json',
  withDefaultFonts: false,
  // No features that call Scalar's hosted services: its AI agent, its proxy, its telemetry, its share/deploy toolbar.
  agent: { disabled: true },
  telemetry: false,
  showDeveloperTools: 'never',
  hideDownloadButton: false,
  defaultOpenAllTags: true,
  defaultHttpClient: { targetKey: 'shell', clientKey: 'curl' },
  authentication: { preferredSecurityScheme: securityScheme },
  metaData: { title },
});

/** Hands Scalar its configuration; a file of its own, since the page allows no inline script. */
const configurationScript = (options: DocsOptions) => `const configuration = ${JSON.stringify(configuration(options))};
configuration.servers = [{ url: window.location.origin, description: 'This server' }];
document.getElementById('api-reference').dataset.configuration = JSON.stringify(configuration);
`;

const STYLE = `body{margin:0}:root{--scalar-font:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;--scalar-font-code:ui-monospace,"SFMono-Regular",Menlo,monospace}\n`;

const page = ({ title }: DocsOptions) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="/favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="/docs/page.css">
</head><body>
<script id="api-reference"></script>
<script src="/docs/configuration.js"></script>
<script src="/docs/scalar.js"></script>
</body></html>`;

/**
 * The page asks for an API key, so nothing but this server's own files may run in it or read from it: no inline
 * script (an injected one would not run), no other origin for scripts, requests, images or forms, and no framing
 * (against clickjacking; X-Frame-Options for browsers that predate frame-ancestors).
 */
const PAGE_HEADERS = {
  'Content-Security-Policy': [
    "default-src 'self'",
    "script-src 'self'",
    // Scalar styles its components with inline <style> elements and style attributes it writes at run time; a style
    // cannot run code, so 'unsafe-inline' here (never for scripts) costs at most a changed look.
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; '),
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
};

/** Registers /docs, its script, the favicon, and / as a redirect to /docs. None of them needs a key. */
export function registerDocs(router: Router, options: DocsOptions = PUBLIC_DOCS): void {
  const html = page(options);
  const script = configurationScript(options);
  router.get('/docs', (ctx) => {
    ctx.type = 'text/html';
    ctx.set(PAGE_HEADERS);
    ctx.body = html;
  });
  router.get('/docs/configuration.js', (ctx) => {
    ctx.type = 'application/javascript';
    ctx.body = script;
  });
  router.get('/docs/page.css', (ctx) => {
    ctx.type = 'text/css';
    ctx.body = STYLE;
  });
  router.get('/docs/scalar.js', (ctx) => {
    ctx.type = 'application/javascript';
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.body = fs.createReadStream(SCALAR_BUNDLE);
  });
  for (const icon of ['/favicon.svg', '/favicon.ico']) {
    router.get(icon, (ctx) => {
      ctx.type = 'image/svg+xml';
      ctx.set('Cache-Control', 'public, max-age=86400');
      ctx.body = FAVICON;
    });
  }
  router.get('/', (ctx) => ctx.redirect('/docs'));
}
