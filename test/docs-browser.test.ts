import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { chromium, type Browser } from 'playwright-core';
import { startApi, type TestApi } from './support/api.js';
import { expectDocumented, PUBLIC_API } from './support/http.js';
import { testDatabase } from './support/database.js';
import { fixture } from './support/fixtures.js';
import { createApiKey } from '../src/core/workspaces.js';
import { loadOpenApiDocument } from '../src/contract/document.js';
import { idOf, operator } from './support/actors.js';

// The reference page as a reader meets it, in Debian's chromium driven by playwright-core: every operation and every
// webhook event is listed, no request leaves the server's own origin, the console stays free of errors, and "try it"
// sends a real request with the key the reader typed and shows the answer. A screenshot is kept for CI.
const CHROMIUM = process.env.FRS_CHROMIUM ?? '/usr/bin/chromium';
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

describe('the reference page (/docs) in a browser', function () {
  this.timeout(90_000);
  let api: TestApi;
  let browser: Browser;

  before(async function () {
    if (!fs.existsSync(CHROMIUM)) {
      // CI installs chromium and must run this test; elsewhere it says what is missing and how to get it.
      if (process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs it with apt-get install chromium`);
      console.warn(`      (skipped: no ${CHROMIUM}; apt-get install chromium, or set FRS_CHROMIUM)`);
      this.skip();
    }
    api = await startApi();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
  });
  after(async () => {
    await browser?.close();
    await api?.close();
  });

  it('lists every operation and webhook, stays on its own origin with no console error, and sends a request with the key entered', async () => {
    const { db } = await testDatabase();
    const f = await fixture(db);
    const { key } = await createApiKey(db, operator, { workspaceId: await idOf(db, f.slug) });
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const requested: string[] = [];
    const consoleErrors: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));

    const loaded = await page.goto(`${api.url}/docs`, { waitUntil: 'networkidle' });
    // The page runs under its Content-Security-Policy (src/http/docs.ts): only this server's own scripts, no framing.
    expect(loaded!.headers()['content-security-policy'])
      .to.include("script-src 'self';")
      .and.include("frame-ancestors 'none'");
    expect(loaded!.headers()['x-frame-options']).to.equal('DENY');
    const document = loadOpenApiDocument();
    const operations = Object.values(document.paths).flatMap((item) =>
      Object.values(item as Record<string, { summary?: string }>),
    );
    // The navigation that lists the operations (the page also has a search bar in a nav of its own, and renders the
    // list after load): the locator waits for it.
    const sidebar = await page.locator('aside, nav').filter({ hasText: operations[0].summary! }).first().innerText();
    expect(operations.length).to.be.at.least(10);
    for (const { summary } of operations) expect(sidebar, `operation "${summary}"`).to.include(summary);
    const webhooks = Object.entries(document.webhooks);
    expect(webhooks).to.have.length(39);
    for (const [event, item] of webhooks) expect(sidebar, `webhook ${event}`).to.include(item.post.summary);

    // Request samples: curl, with the bearer header.
    await page.getByText('Check the API key').first().click();
    await page
      .getByText(/curl .*\/v1\/me/)
      .first()
      .waitFor();

    // "Try it": the key typed into the page goes with the request to this server, and its answer is shown.
    // the first visible one: the first Token field in the page was seen hidden for 30 s (twice, on a busy machine)
    await page.getByPlaceholder('Token').filter({ visible: true }).first().fill(key);
    await page.getByRole('button', { name: 'Test Request' }).first().click();
    const answered = page.waitForResponse((response) => response.url() === `${api.url}/v1/me`);
    await page.getByRole('button', { name: /^Send/ }).first().click();
    const response = await answered;
    expect(await response.request().headerValue('authorization')).to.equal(`Bearer ${key}`);
    const text = await response.text();
    const answer = {
      status: response.status(),
      headers: new Headers(await response.allHeaders()),
      text,
      body: JSON.parse(text),
    };
    expectDocumented(PUBLIC_API, 'GET', '/v1/me', answer);
    expect(answer).to.deep.include({
      status: 200,
      body: { workspace: { slug: f.slug, status: 'active' }, role: null },
    });
    await page.getByText(f.slug).first().waitFor({ timeout: 10_000 });

    const shot = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'frs-docs-')), 'docs.png');
    await page.screenshot({ path: shot, fullPage: false });
    console.log(`      screenshot: ${shot}`);
    const origins = [...new Set(requested.map((url) => new URL(url).origin))];
    console.log(`      requests: ${[...new Set(requested.map((url) => url.replace(api.url, '')))].join(', ')}`);
    expect(origins, 'every request stays on the server').to.deep.equal([api.url]);
    expect(consoleErrors, 'console errors').to.deep.equal([]);

    // The policy holds: a script injected into the page (as a cross-site scripting flaw would) does not run, and the
    // browser reports the refusal.
    const ran = await page.evaluate(`(() => {
      const script = document.createElement('script');
      script.textContent = 'window.injectedScriptRan = true';
      document.body.append(script);
      return window.injectedScriptRan === true;
    })()`);
    expect(ran, 'an injected inline script ran').to.equal(false);
    await page.waitForTimeout(100);
    expect(consoleErrors.join('\n')).to.match(/Content Security Policy/);
  });
});
