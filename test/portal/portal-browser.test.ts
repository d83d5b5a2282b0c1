import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import type { Knex } from 'knex';
import { chromium, type Browser, type BrowserContext, type Page, type Response } from 'playwright-core';
import { ROOT_DIR } from '../../src/config.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { recordEvent } from '../../src/webhooks/record-event.js';
import { Dispatcher } from '../../src/webhooks/dispatcher.js';
import { RETRY_DELAYS_MS } from '../../src/webhooks/retry-schedule.js';
import { testDatabase } from '../support/database.js';
import { fixture } from '../support/fixtures.js';
import { startReceiver, verifyIndependently, type Receiver, type Reply } from '../support/receiver.js';
import { bookingConfirmedData, quietLogger } from '../webhooks/support.js';
import { startScreen, type TestScreen } from './support.js';
import { expectDocumented, SCREEN_API } from '../support/http.js';
import { operator } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// The settings screen as the workspace's staff meet it, in Debian's chromium driven by playwright-core (as the
// reference page's test does). Controls are found only by their accessible role and name, as a screen reader would.
// One workspace's story, in order: a fresh link, a key read once, an endpoint to a local receiver with its secret read
// once, a test delivery seen in the log with its attempt, 20 failures that switch the endpoint off, switching it back
// on, rotating its secret, retrying a delivery; then what is refused: the link a second time, another workspace's
// endpoint, a write without the CSRF token, framing by a site that is not listed. Throughout: no console error but the
// refusals the test provokes, no request off the service's origin, and every answer of the screen's API as the admin
// document declares it. Screenshots of each main page go to test-artifacts/portal/.
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
const ARTIFACTS = path.join(ROOT_DIR, 'test-artifacts', 'portal');
const TIME_ZONE = 'Asia/Dubai';

describe('the settings screen (/portal) in a browser', function () {
  this.timeout(120_000);
  let db: Knex;
  let screen: TestScreen;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let receiver: Receiver;
  let answer: () => Reply = () => ({ status: 204 });
  let workspace: { id: string; slug: string };
  let link: { id: string; url: string; key: string };
  let dispatcher: Dispatcher;
  let endpointId: string;
  let endpointUrl: string;
  let started = 0;
  /** Every request the pages made, every console error, and the answers still being checked against the document. */
  const requested: string[] = [];
  const consoleErrors: Array<{ text: string; url: string }> = [];
  /** Failed loads the test provokes (a refused link, another workspace's id, a write without the token): "STATUS URL". */
  const provoked = new Set<string>();
  const checks: Array<Promise<void>> = [];
  const shots: string[] = [];
  /** Answers the test makes up itself (page.route) to show how the page words them: "METHOD URL", not checked against the document. */
  const fabricated = new Set<string>();

  /** Watches a page: its requests, console errors, and every answer of /portal/api checked against the admin document. */
  function watch(p: Page, requests = requested): Page {
    p.on('request', (request) => requests.push(request.url()));
    p.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push({ text: message.text(), url: message.location().url });
    });
    p.on('pageerror', (error) => consoleErrors.push({ text: error.message, url: '' }));
    p.on('response', (response) => {
      if (
        new URL(response.url()).pathname.startsWith('/portal/api/') &&
        !fabricated.has(`${response.request().method()} ${response.url()}`)
      )
        checks.push(checkDocumented(response));
    });
    return p;
  }
  async function checkDocumented(response: Response): Promise<void> {
    const url = new URL(response.url());
    const text = response.status() === 204 ? '' : await response.text();
    const headers = new Headers(await response.allHeaders());
    expectDocumented(SCREEN_API, response.request().method(), url.pathname + url.search, {
      status: response.status(),
      headers,
      body: text ? JSON.parse(text) : undefined,
    });
  }
  async function shot(p: Page, name: string, fullPage = true): Promise<void> {
    const file = path.join(ARTIFACTS, `${name}.png`);
    await p.screenshot({ path: file, fullPage });
    shots.push(file);
  }
  /** The answer of the screen's API that `action` causes, matched by method and path. */
  async function answerTo(
    method: string,
    pathname: string | RegExp,
    action: () => Promise<unknown>,
  ): Promise<Response> {
    const waited = page.waitForResponse(
      (r) =>
        r.request().method() === method &&
        (typeof pathname === 'string'
          ? new URL(r.url()).pathname === pathname
          : pathname.test(new URL(r.url()).pathname)),
    );
    await action();
    return waited;
  }
  const adminPath = (rest: string) => `/portal/api/admin/v1/workspaces/${workspace.id}${rest}`;
  /** An error answer made up by the test for `method url` (an admin-document error body, with its status and headers). */
  function fabricate(
    method: string,
    url: string,
    status: number,
    message: string,
    headers: Record<string, string> = {},
  ) {
    fabricated.add(`${method} ${url}`);
    provoked.add(`${status} ${url}`);
    return {
      status,
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ error: { code: 'unavailable', message } }),
    };
  }
  /** Waits until the focused element's text is `text` (after a redraw removed the control that had focus). */
  const focusIs = (p: Page, text: string) =>
    p.waitForFunction((expected) => document.activeElement?.textContent === expected, text, { timeout: 5_000 });
  const endpointRow = () => db('webhook_endpoints').where({ id: endpointId }).first();
  const nav = (name: string) => page.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name });

  before(async function () {
    started = Date.now();
    if (!fs.existsSync(CHROMIUM)) {
      // CI installs chromium and must run this test; elsewhere it says what is missing and how to get it.
      if (process.env.CI) throw new Error(`${CHROMIUM} is missing: .ci/run installs it with apt-get install chromium`);
      console.warn(`      (skipped: no ${CHROMIUM}; apt-get install chromium, or set FRS_CHROMIUM)`);
      this.skip();
    }
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    const database = await testDatabase();
    db = database.db;
    const f = await fixture(db, { timezone: TIME_ZONE });
    workspace = { id: f.ws.id, slug: f.slug };
    screen = await startScreen();
    receiver = await startReceiver(() => answer());
    // The test's own dispatcher, restricted to this workspace, as the worker's database role; its receiver is on
    // 127.0.0.1, which the test run allows (FRS_ALLOW_PRIVATE_WEBHOOK_URLS=1, test/support/hooks.ts).
    dispatcher = new Dispatcher({
      db: database.forRole('worker'),
      logger: quietLogger(),
      workspaceIds: [workspace.id],
      concurrency: 1,
      // (retries without jitter: the test walks the schedule's exact instants)
      random: () => 0,
    });
    link = await screen.link(workspace.id);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = watch(await context.newPage());
  });
  after(async () => {
    await browser?.close();
    await receiver?.close();
    await screen?.close();
    if (shots.length)
      console.log(`      screenshots:\n${shots.map((file) => `        ${path.relative(ROOT_DIR, file)}`).join('\n')}`);
    console.log(`      the browser test took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  });

  it('opens a fresh link: a session of the workspace starts (201), the key leaves the address bar, the page runs under its policy', async () => {
    expect(link.url).to.equal(`${screen.url}/portal/#key=${link.key}`);
    const documentAnswer = page.waitForResponse((r) => r.url() === `${screen.url}/portal/`);
    const session = await answerTo('POST', '/portal/api/session', () => page.goto(link.url));
    expect(session.status()).to.equal(201);
    expect((await session.json()).workspace).to.deep.include({
      id: workspace.id,
      slug: workspace.slug,
      timezone: TIME_ZONE,
    });
    const csp = (await documentAnswer).headers()['content-security-policy'];
    expect(csp).to.include("default-src 'none'").and.include("script-src 'self'").and.include("frame-ancestors 'none'");
    await page.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    expect(page.url()).to.equal(`${screen.url}/portal/endpoints`);
    await page.getByText(`Workspace ${workspace.slug}`).waitFor();
  });

  it('creates an API key and shows it once, with a copy button and the warning; revokes one after confirming', async () => {
    await nav('API keys').click();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    await page.getByLabel('Role (optional)').fill('reporting <b>bold</b>');
    const created = await answerTo('POST', adminPath('/api-keys'), () =>
      page.getByRole('button', { name: 'Create key' }).click(),
    );
    expect(created.status()).to.equal(201);
    expect(await created.request().headerValue('idempotency-key')).to.equal(null);
    const key = await page.getByRole('textbox', { name: 'New API key' }).inputValue();
    expect(key).to.match(/^frs_[0-9A-Za-z]{32,}$/);
    await page.getByText('Copy it now: it will not be shown again.').waitFor();
    await page.getByRole('button', { name: 'Copy' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /Copied|Selected/ })
      .waitFor();
    // The key works on the public API; the role typed is shown as text, not markup.
    const me = await fetch(`${screen.url}/v1/me`, { headers: { authorization: `Bearer ${key}` } });
    expect(me.status).to.equal(200);
    const row = page.getByRole('row').filter({ hasText: 'reporting <b>bold</b>' });
    await row.waitFor();
    expect(await row.locator('b').count()).to.equal(0);

    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    expect(await page.getByRole('textbox', { name: 'New API key' }).count(), 'the key shown again').to.equal(0);
    expect(await page.content()).not.to.include(key);

    await page.getByRole('button', { name: /^Revoke key reporting <b>bold<\/b> created / }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke this API key?' });
    await dialog.getByRole('button', { name: 'Revoke key' }).focus();
    const revoked = await answerTo('POST', /\/api-keys\/[^/]+\/revoke$/, () =>
      dialog.getByRole('button', { name: 'Revoke key' }).press('Enter'),
    );
    expect(revoked.status()).to.equal(200);
    await page.getByText('The key is revoked.').waitFor();
    // The dialog gave focus back to the Revoke button, which the redraw removed: the outcome's status line has it.
    await focusIs(page, 'The key is revoked.');
    expect((await fetch(`${screen.url}/v1/me`, { headers: { authorization: `Bearer ${key}` } })).status).to.equal(401);
    await shot(page, 'keys');
  });

  it('adds an endpoint to a local receiver with events from the catalogue, and shows its signing secret once', async () => {
    await nav('Endpoints').click();
    await page.getByRole('link', { name: 'Add endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: 'Add an endpoint' }).waitFor();
    // The events are grouped as the catalogue groups them.
    await page
      .getByRole('group', { name: 'Booking events' })
      .getByRole('checkbox', { name: /^booking\.confirmed/ })
      .check();
    await page
      .getByRole('group', { name: 'Money events' })
      .getByRole('checkbox', { name: /^payment\.captured/ })
      .check();
    // An error of the API is shown next to the field it names.
    await page.getByLabel('URL').fill('ftp://files.example.com/hook');
    provoked.add(`400 ${screen.url}${adminPath('/endpoints')}`);
    const refused = await answerTo('POST', adminPath('/endpoints'), () =>
      page.getByRole('button', { name: 'Add endpoint' }).click(),
    );
    expect(refused.status()).to.equal(400);
    const refusal = (await refused.json()).error;
    expect(refusal.reason).to.equal('url');
    await page.getByText(refusal.message).waitFor();
    expect(await page.getByLabel('URL').getAttribute('aria-invalid')).to.equal('true');

    endpointUrl = receiver.endpointUrl();
    await page.getByLabel('URL').fill(endpointUrl);
    await page.getByLabel('Name (optional)').fill('Accounting sync');
    const created = await answerTo('POST', adminPath('/endpoints'), () =>
      page.getByRole('button', { name: 'Add endpoint' }).click(),
    );
    expect(created.status()).to.equal(201);
    const secret = await page.getByRole('textbox', { name: 'Signing secret' }).inputValue();
    expect(secret).to.match(/^whsec_[0-9A-Za-z]{32,}$/);
    receiver.setSecret(endpointUrl, secret);
    await page.getByText('Copy it now: it will not be shown again.').waitFor();
    await page.getByRole('link', { name: 'Open the endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: 'Accounting sync' }).waitFor();
    endpointId = page.url().split('/').pop()!;
    expect(await endpointRow()).to.include({ url: endpointUrl, name: 'Accounting sync' });
    expect((await endpointRow()).events).to.have.members(['booking.confirmed', 'payment.captured']);
    expect(await page.content()).not.to.include(secret);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Accounting sync' }).waitFor();
    expect(await page.getByRole('textbox', { name: 'Signing secret' }).count()).to.equal(0);
  });

  it('sends a test delivery, and the delivery log shows it arrive with its attempt without a reload', async () => {
    const sent = await answerTo('POST', adminPath('/example-events'), () =>
      page.getByRole('button', { name: 'Send test delivery' }).click(),
    );
    expect(sent.status()).to.equal(202);
    expect(sent.request().postDataJSON()).to.deep.equal({ endpointId, event: 'webhook.test' });
    const { deliveryId } = await sent.json();
    await page.getByText(`A test delivery is queued (delivery ${deliveryId}).`).waitFor();
    await focusIs(page, `A test delivery is queued (delivery ${deliveryId}).`);

    await nav('Deliveries').click();
    await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: /^webhook\.test/ }) });
    await row.getByText('queued').waitFor();
    const loads = requested.filter((url) => url.endsWith('/portal/assets/app.js')).length;
    expect(await dispatcher.runOnce()).to.deep.include({ attempted: 1, accepted: 1 });
    expect(receiver.requests).to.have.length(1);
    expect(receiver.requests[0]).to.deep.include({ event: 'webhook.test', deliveryId, verified: { ok: true } });
    // The log refreshes by itself (every 5 s while visible): the row turns accepted, no reload.
    await row.getByText('accepted').waitFor({ timeout: 12_000 });
    expect(requested.filter((url) => url.endsWith('/portal/assets/app.js')).length, 'the page was reloaded').to.equal(
      loads,
    );

    await row.getByRole('link', { name: /^webhook\.test/ }).click();
    await page.getByRole('heading', { level: 1, name: 'Delivery of webhook.test' }).waitFor();
    const payload = JSON.parse((await page.getByLabel('Payload', { exact: true }).textContent())!);
    expect(payload).to.deep.include({ id: deliveryId, event: 'webhook.test' });
    expect(payload.data).to.deep.include({ endpointId });
    const attempts = page.getByRole('table', { name: 'Every attempt, oldest first' });
    expect(await attempts.getByRole('row').count()).to.equal(2);
    const cells = await attempts.getByRole('row').nth(1).getByRole('cell').allTextContents();
    expect(cells[0]).to.equal('1');
    expect(cells[2]).to.match(/^\d+ ms$/);
    expect(cells[3]).to.equal('204');
    expect(cells[4]).to.equal('—');
    await shot(page, 'delivery');
  });

  it('20 failures in a row switch the endpoint off: the list shows "Switched off" and when, the chart counts them; it is switched back on', async () => {
    // (a 500: a 503 would throttle the endpoint after its first answer)
    answer = () => ({ status: 500, body: 'receiver is down' });
    for (let i = 0; i < 20; i++)
      await recordEvent(db, {
        workspaceId: workspace.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
    expect(await dispatcher.runOnce()).to.deep.include({ attempted: 20, retrying: 20 });
    const off = await endpointRow();
    expect(off).to.include({ is_active: false, consecutive_failures: 20, disabled_reason: 'failures' });

    await nav('Endpoints').click();
    const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'Accounting sync' }) });
    await row.getByText(/^Switched off /).waitFor();
    expect(await row.locator('time').first().getAttribute('datetime')).to.equal(off.disabled_at.toISOString());
    expect(await row.getByText(/^Switched off /).textContent()).to.match(
      /^Switched off \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d:\d\d \S+, after 20 failed attempts in a row$/,
    );
    const cells = await row.getByRole('cell').allTextContents();
    expect(cells[3], 'failures in a row').to.equal('20');
    await shot(page, 'endpoints');

    // The log: what failed, and what the switched-off endpoint holds.
    await nav('Deliveries').click();
    await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
    expect(await page.getByRole('cell', { name: 'held' }).count()).to.equal(20);
    expect(await page.getByRole('cell', { name: '500 · status' }).count()).to.equal(20);
    await shot(page, 'deliveries', false);

    await nav('Endpoints').click();
    await row.getByRole('link', { name: 'Accounting sync' }).click();
    await page.getByRole('heading', { level: 1, name: 'Accounting sync' }).waitFor();
    // The chart: 1 attempt accepted (the test), 20 answered 500; its text alternative says so.
    // The chart's text alternative (its <title> and <desc>) gives the figures.
    await page
      .getByRole('img', {
        name: 'Attempts by outcome, last 24 hours. Last 24 hours: 1 succeeded, 20 failed with another status, 0 without an answer.',
      })
      .waitFor();
    await page.getByRole('button', { name: 'Last 7 days' }).click();
    await page
      .getByRole('img', {
        name: 'Attempts by outcome, last 7 days. Last 7 days: 1 succeeded, 20 failed with another status, 0 without an answer.',
      })
      .waitFor();
    expect(await page.getByRole('button', { name: 'Last 7 days' }).getAttribute('aria-pressed')).to.equal('true');
    await page.getByRole('button', { name: 'Last 24 hours' }).click();
    await page.getByRole('img', { name: /^Attempts by outcome, last 24 hours/ }).waitFor();
    await shot(page, 'endpoint', false);

    const enabled = await answerTo('POST', adminPath(`/endpoints/${endpointId}/enable`), () =>
      page.getByRole('button', { name: 'Switch back on' }).click(),
    );
    expect(enabled.status()).to.equal(200);
    await page.getByText('The endpoint is switched back on; what it held is being sent.').waitFor();
    await focusIs(page, 'The endpoint is switched back on; what it held is being sent.');
    await page
      .getByRole('definition')
      .filter({ hasText: /^Active$/ })
      .waitFor();
    expect(await endpointRow()).to.include({ is_active: true, disabled_at: null, consecutive_failures: 0 });

    // An endpoint its receiver throttled (429, 502, 503, 504) says until when, while the throttle holds.
    await db('webhook_endpoints').where({ id: endpointId }).update({ throttled_until: '2099-01-01T00:00:00.000Z' });
    await nav('Endpoints').click();
    const listed = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'Accounting sync' }) });
    await listed.getByText(/^Active, throttled until /).waitFor();
    expect(await listed.locator('time').first().getAttribute('datetime')).to.equal('2099-01-01T00:00:00.000Z');
    await db('webhook_endpoints').where({ id: endpointId }).update({ throttled_until: null });
    await listed.getByRole('link', { name: 'Accounting sync' }).click();
    await page.getByRole('heading', { level: 1, name: 'Accounting sync' }).waitFor();
  });

  it('rotates the secret with an overlap: shown once, and the next deliveries carry both signatures', async () => {
    await page.getByLabel('Secret overlap (hours)').fill('2');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const dialog = page.getByRole('dialog', { name: 'Rotate the signing secret?' });
    const rotated = await answerTo('POST', adminPath(`/endpoints/${endpointId}/rotate-secret`), () =>
      dialog.getByRole('button', { name: 'Rotate' }).click(),
    );
    expect(rotated.status()).to.equal(200);
    expect(rotated.request().postDataJSON()).to.deep.equal({ overlapHours: 2 });
    const secret = await page.getByRole('textbox', { name: 'New signing secret' }).inputValue();
    expect(secret).to.match(/^whsec_/);
    await page.getByText(/^The previous secret also signs until /).waitFor();

    // What the endpoint held and what failed is due again once it is on: sent now, signed with both secrets.
    answer = () => ({ status: 204 });
    receiver.reset();
    receiver.setSecret(endpointUrl, secret);
    await db('deliveries')
      .where({ endpoint_id: endpointId, status: 'retrying' })
      .update({ next_attempt_at: db.fn.now() });
    expect((await dispatcher.runOnce()).accepted).to.equal(20);
    for (const request of receiver.requests) {
      expect(request.verified).to.deep.equal({ ok: true });
      expect(request.signature!.match(/v1=/g)).to.have.length(2);
      expect(String(request.headers['webhook-signature']).split(' ')).to.have.length(2);
      expect(verifyIndependently(request.rawBody, request.signature, secret, Date.now() / 1000)).to.deep.equal({
        ok: true,
      });
    }
  });

  it('retries a delivery from its page: attempted again, the new attempt shown', async () => {
    await page.getByRole('link', { name: 'Deliveries to this endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
    expect(await page.getByLabel('Endpoint').inputValue()).to.equal(endpointId);
    await page
      .getByRole('link', { name: /^booking\.confirmed/ })
      .first()
      .click();
    await page.getByRole('heading', { level: 1, name: 'Delivery of booking.confirmed' }).waitFor();
    const attempts = page.getByRole('table', { name: 'Every attempt, oldest first' });
    expect(await attempts.getByRole('row').count()).to.equal(3);
    const retried = await answerTo('POST', /\/deliveries\/[^/]+\/retry$/, () =>
      page.getByRole('button', { name: 'Retry now' }).click(),
    );
    expect(retried.status()).to.equal(200);
    expect(await retried.json()).to.deep.include({ previousStatus: 'accepted', status: 'queued', attempts: 2 });
    await page.getByText('The delivery is due now (it was accepted).').waitFor();
    expect((await dispatcher.runOnce()).accepted).to.equal(1);
    await attempts.getByRole('row').nth(3).waitFor({ timeout: 12_000 });
    expect(await attempts.getByRole('row').nth(3).getByRole('cell').nth(3).textContent()).to.equal('204');
  });

  it("recovers an endpoint's failed deliveries since a time given in the workspace's zone", async () => {
    // One delivery that fails its whole retry schedule (the sweep's clock walks it; no real waiting).
    answer = () => ({ status: 500, body: 'down for maintenance' });
    const { eventId } = await recordEvent(db, {
      workspaceId: workspace.id,
      event: 'booking.confirmed',
      data: bookingConfirmedData(),
      source: 'publish',
    });
    const { id } = await db('deliveries').where({ event_id: eventId }).first('id');
    let sweep = new Date();
    await dispatcher.runOnce(sweep);
    for (const delay of RETRY_DELAYS_MS) {
      sweep = new Date(sweep.getTime() + delay);
      await dispatcher.runOnce(sweep);
    }
    expect(await db('deliveries').where({ id }).first()).to.include({ status: 'failed', attempts: 9 });

    // "Since" an hour ago, typed as the wall time in Dubai (UTC+4, no daylight saving): sent as that instant in UTC.
    const since = new Date(Math.floor((Date.now() - 3600_000) / 60_000) * 60_000);
    const dubai = new Date(since.getTime() + 4 * 3600_000).toISOString().slice(0, 16);
    await page.goto(`${screen.url}/portal/endpoints/${endpointId}`);
    await page.getByRole('heading', { level: 1, name: 'Accounting sync' }).waitFor();
    await page.getByLabel('Since').fill(dubai);
    answer = () => ({ status: 204 });
    // Like every bulk change, it asks first.
    await page.getByRole('button', { name: 'Recover failed deliveries' }).click();
    const dialog = page.getByRole('dialog', { name: 'Recover failed deliveries?' });
    await dialog
      .getByText(
        /^Every failed delivery to this endpoint created since \d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d:00 \S+ is sent again\.$/,
      )
      .waitFor();
    const recovered = await answerTo('POST', adminPath(`/endpoints/${endpointId}/recover`), () =>
      dialog.getByRole('button', { name: 'Recover' }).click(),
    );
    expect(recovered.status()).to.equal(200);
    expect(recovered.request().postDataJSON()).to.deep.equal({ since: since.toISOString() });
    await page.getByText('1 failed delivery is queued again.').waitFor();
    expect(await db('deliveries').where({ id }).first()).to.include({ status: 'queued' });
    expect((await dispatcher.runOnce()).accepted).to.equal(1);
  });

  it('pages through the delivery log by its cursor, and filters it', async () => {
    // 22 deliveries so far (a test, 20 that failed then went through, 1 recovered); 30 more queued: 52, two pages.
    for (let i = 0; i < 30; i++)
      await recordEvent(db, {
        workspaceId: workspace.id,
        event: 'booking.confirmed',
        data: bookingConfirmedData(),
        source: 'publish',
      });
    await nav('Deliveries').click();
    const log = page.getByRole('table', { name: 'Deliveries, newest first' });
    await log.waitFor();
    expect(await log.getByRole('row').count()).to.equal(51);
    const next = await answerTo('GET', adminPath('/deliveries'), () =>
      page.getByRole('button', { name: 'Next page' }).click(),
    );
    expect(new URL(next.url()).searchParams.get('cursor')).to.match(/^[A-Za-z0-9_-]+$/);
    await page.getByRole('button', { name: 'Previous page' }).waitFor();
    expect(await log.getByRole('row').count()).to.equal(3);
    expect(await page.getByRole('button', { name: 'Next page' }).count()).to.equal(0);
    // The button pressed is gone with the page it was on: focus goes to the new page's table, by its caption.
    await focusIs(page, 'Deliveries, newest first');
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByRole('button', { name: 'Next page' }).waitFor();
    await focusIs(page, 'Deliveries, newest first');
    expect(await log.getByRole('row').count()).to.equal(51);

    // Filters: the test delivery alone, by its event; the address keeps the filters.
    await page.getByLabel('Event').selectOption('webhook.test');
    await page.getByLabel('Status').selectOption('accepted');
    const filtered = await answerTo('GET', adminPath('/deliveries'), () =>
      page.getByRole('button', { name: 'Apply filters' }).click(),
    );
    expect(Object.fromEntries(new URL(filtered.url()).searchParams)).to.deep.equal({
      status: 'accepted',
      event: 'webhook.test',
      limit: '50',
    });
    expect(new URL(page.url()).search).to.equal('?status=accepted&event=webhook.test');
    await page.getByRole('table', { name: 'Deliveries, newest first' }).getByRole('row').nth(1).waitFor();
    expect(await page.getByRole('table', { name: 'Deliveries, newest first' }).getByRole('row').count()).to.equal(2);
  });

  it('ignores a time in the address that is no time, and says so in the filter form', async () => {
    const list = answerTo('GET', adminPath('/deliveries'), () =>
      page.goto(`${screen.url}/portal/deliveries?since=foo&status=accepted`),
    );
    expect(Object.fromEntries(new URL((await list).url()).searchParams)).to.deep.equal({
      status: 'accepted',
      limit: '50',
    });
    await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
    await page.getByText('The address\'s time "foo" is not a time: it is ignored.').waitFor();
    expect(await page.getByLabel('Created since').inputValue()).to.equal('');
    expect(await page.getByLabel('Status').inputValue()).to.equal('accepted');
  });

  it('says in words when a refresh fails, backs off as Retry-After asks, and a refused filter does not take the focus', async () => {
    await page.goto(`${screen.url}/portal/deliveries`);
    await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
    const list = `${screen.url}${adminPath('/deliveries')}?limit=50`;
    const isList = (url: URL) => url.href === list;
    const asked: number[] = [];
    await page.route(isList, (route) => {
      asked.push(Date.now());
      return route.fulfill(fabricate('GET', list, 503, 'The service is busy.', { 'retry-after': '8' }));
    });
    const note = page
      .getByRole('status')
      .filter({ hasText: "Couldn't refresh this page: The service is busy. Trying again in 8 s." });
    await note.waitFor({ timeout: 12_000 });
    // Retry-After: 8 s, not the next 5-second tick.
    await page.waitForTimeout(6_000);
    expect(asked, 'asked again before Retry-After').to.have.length(1);
    await page.unroute(isList);
    await note.waitFor({ state: 'hidden', timeout: 12_000 });
    expect(
      await page.getByRole('table', { name: 'Deliveries, newest first' }).getByRole('row').count(),
    ).to.be.greaterThan(1);

    // A 400 of a background refresh is shown next to its field, but focus stays where the person left it.
    await page.route(isList, (route) =>
      route.fulfill({
        ...fabricate('GET', list, 400, 'since must be a date-time.'),
        body: JSON.stringify({
          error: { code: 'invalid_request', message: 'since must be a date-time.', reason: 'since' },
        }),
      }),
    );
    await nav('Deliveries').focus();
    await page.getByText('since must be a date-time.').waitFor({ timeout: 12_000 });
    expect(await page.evaluate(() => document.activeElement?.textContent)).to.equal('Deliveries');
    await page.unroute(isList);
  });

  it('saves the reminders ahead on the settings page, and names a value out of range next to the field', async () => {
    await nav('Settings').click();
    await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
    await page.getByLabel('Reminders ahead (days)').fill('61');
    await page.getByRole('button', { name: 'Save settings' }).click();
    await page.getByText('Enter a whole number of days from 1 to 60.').waitFor();
    await page.getByLabel('Reminders ahead (days)').fill('9');
    await page.getByLabel('Time zone').selectOption('Europe/London');
    const saved = await answerTo('PATCH', adminPath(''), () =>
      page.getByRole('button', { name: 'Save settings' }).click(),
    );
    expect(saved.status()).to.equal(200);
    expect(saved.request().postDataJSON()).to.deep.equal({ remindersAhead: 9, timezone: 'Europe/London' });
    await page.getByText('Settings saved.').waitFor();
    expect(await db('workspaces').where({ id: workspace.id }).first()).to.include({
      reminders_ahead: 9,
      timezone: 'Europe/London',
    });
    await shot(page, 'settings');
    // Times are shown in the workspace's zone, named as that zone names that instant: London's is GMT in winter and
    // BST in summer (whatever the date the suite runs at, and whatever the browser's own zone).
    await nav('Endpoints').click();
    const lastSuccess = page
      .getByRole('row')
      .filter({ has: page.getByRole('link', { name: 'Accounting sync' }) })
      .locator('time')
      .last();
    const instant = new Date((await lastSuccess.getAttribute('datetime'))!);
    const london = Object.fromEntries(
      new Intl.DateTimeFormat('en-GB', {
        timeZone: 'Europe/London',
        hourCycle: 'h23',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
        timeZoneName: 'short',
      })
        .formatToParts(instant)
        .map((part) => [part.type, part.value]),
    );
    expect(london.timeZoneName).to.be.oneOf(['GMT', 'BST']);
    expect(await lastSuccess.textContent()).to.match(
      new RegExp(
        `^\\d{1,2} [A-Z][a-z]{2} \\d{4}, ${london.hour}:${london.minute}:${london.second} ${london.timeZoneName}$`,
      ),
    );
  });

  it('shows the event catalogue grouped, each event with its fields and example, and how to verify a signature', async () => {
    await nav('Event catalogue').click();
    await page.getByRole('heading', { level: 1, name: 'Event catalogue' }).waitFor();
    await page.getByRole('heading', { level: 2, name: 'Booking events' }).waitFor();
    await page.getByRole('heading', { level: 3, name: 'booking.confirmed' }).waitFor();
    await page.getByText('Description, fields and example of booking.confirmed').click();
    const example = JSON.parse((await page.getByLabel('Example payload of booking.confirmed').textContent())!);
    expect(example.data).to.deep.equal(bookingConfirmedData());
    // The document's Markdown is shown as text: `confirmed` is a code element, no backtick is left on the page.
    const confirmed = page.getByRole('article', { name: 'booking.confirmed' });
    const firstParagraph = confirmed.locator('.description p').first();
    expect(await firstParagraph.textContent()).to.equal('Fires when a booking reaches status confirmed.');
    expect(await firstParagraph.locator('code').allTextContents()).to.deep.equal(['confirmed']);
    const shown = await page.locator('.event .summary, .event .description').allTextContents();
    expect(shown.length).to.be.greaterThan(20);
    expect(shown.filter((text) => /[`]|\*\*|\]\(/.test(text))).to.deep.equal([]);
    for (const language of ['Node.js', 'Python', 'Go'])
      await page.getByRole('heading', { level: 3, name: language }).waitFor();
    await shot(page, 'events', false);
  });

  it("renders the catalogue's Markdown as plain elements, never as markup: links as their text, HTML as characters", async () => {
    // The catalogue as the document could word it: the test rewrites one description of the real answer.
    const markdown = [
      'Sent **at least once**, *never* in order; see [Standard Webhooks](https://www.standardwebhooks.com/).',
      'What `data` holds:\n- `bookingId`, the booking\n- `fleet`, its **fleet**',
      'Shown as typed: <img src=x onerror="document.title=\'pwned\'"> and <b>bold</b>.',
    ].join('\n\n');
    const other = watch(await context.newPage());
    await other.route('**/event-types', async (route) => {
      fabricated.add(`GET ${route.request().url()}`);
      const response = await route.fetch();
      const body = await response.json();
      const row = body.rows.find((r: { event: string }) => r.event === 'booking.confirmed');
      row.description = markdown;
      await route.fulfill({ response, json: body });
    });
    await other.goto(`${screen.url}/portal/events`);
    await other.getByRole('heading', { level: 1, name: 'Event catalogue' }).waitFor();
    const article = other.getByRole('article', { name: 'booking.confirmed' });
    await article.getByText('Description, fields and example of booking.confirmed').click();
    const description = article.locator('.description');
    expect(await description.locator('p').allTextContents()).to.deep.equal([
      'Sent at least once, never in order; see Standard Webhooks.',
      'What data holds:',
      'Shown as typed: <img src=x onerror="document.title=\'pwned\'"> and <b>bold</b>.',
    ]);
    expect(await description.locator('strong').allTextContents()).to.deep.equal(['at least once', 'fleet']);
    expect(await description.locator('em').allTextContents()).to.deep.equal(['never']);
    expect(await description.getByRole('listitem').allTextContents()).to.deep.equal([
      'bookingId, the booking',
      'fleet, its fleet',
    ]);
    expect(await description.locator('code').allTextContents()).to.deep.equal(['data', 'bookingId', 'fleet']);
    // No link off the screen, no element the text named, no script run.
    expect(await description.locator('a, img, b').count()).to.equal(0);
    expect(await other.title()).not.to.equal('pwned');
    await shot(other, 'events-markdown', false);
    await other.close();
  });

  it('refuses the link a second time, in words (the session POST is 401)', async () => {
    const other = await browser.newContext();
    const second = watch(await other.newPage());
    const refused = second.waitForResponse(
      (r) => new URL(r.url()).pathname === '/portal/api/session' && r.request().method() === 'POST',
    );
    provoked.add(`401 ${screen.url}/portal/api/session`);
    await second.goto(link.url);
    expect((await refused).status()).to.equal(401);
    await second.getByRole('heading', { level: 1, name: 'This link cannot be used' }).waitFor();
    await second.getByText('This link has already been used or has expired. Ask for a new one.').waitFor();
    expect(await second.getByRole('navigation', { name: 'Settings' }).isVisible()).to.equal(false);
    await other.close();

    // The same link again where its session's cookie is still held (a frame made again with the same src): the key
    // is refused, and the page goes on with the session it has.
    const again = answerTo('GET', '/portal/api/session', () => page.goto(link.url));
    expect((await again).status()).to.equal(200);
    await page.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    expect(page.url()).to.equal(`${screen.url}/portal/endpoints`);
  });

  it('words why a link could not be opened (malformed, too many attempts, unavailable), and tries the same link again', async () => {
    const other = await browser.newContext();
    const opener = watch(await other.newPage());
    const fresh = await screen.link(workspace.id);
    const sessionUrl = `${screen.url}/portal/api/session`;
    const refuse = async (status: number, message: string, headers: Record<string, string> = {}) => {
      await opener.unroute(sessionUrl);
      await opener.route(sessionUrl, (route) => route.fulfill(fabricate('POST', sessionUrl, status, message, headers)));
      await opener.goto('about:blank'); // the link again is a new document, not a change of its fragment
      await opener.goto(fresh.url);
    };
    await refuse(400, "key must be the link's key.");
    await opener.getByRole('heading', { level: 1, name: 'This link is malformed' }).waitFor();
    await opener
      .getByText('This link is incomplete or was changed. Open the API settings again from your rental platform.')
      .waitFor();
    expect(await opener.getByRole('button', { name: 'Try again' }).count()).to.equal(0);
    await refuse(503, 'The service is busy.');
    await opener.getByRole('heading', { level: 1, name: 'Service unavailable' }).waitFor();
    await opener.getByText('The service is unavailable for now: try again in a moment.').waitFor();
    await refuse(429, 'Too many failed attempts.', { 'retry-after': '30' });
    await opener.getByRole('heading', { level: 1, name: 'Too many attempts' }).waitFor();
    await opener.getByText('There were too many attempts from this address: try again in 30 s.').waitFor();
    expect(opener.url(), 'the key left the address').to.equal(`${screen.url}/portal/`);
    // The key was not used up: trying again with it (kept by the page, not the address) opens the session.
    await opener.unroute(sessionUrl);
    const opened = await (async () => {
      const waited = opener.waitForResponse((r) => r.url() === sessionUrl && r.request().method() === 'POST');
      await opener.getByRole('button', { name: 'Try again' }).click();
      return waited;
    })();
    expect(opened.status()).to.equal(201);
    await opener.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    await other.close();
  });

  it("shows another workspace's endpoint as not found (the API answers 404)", async () => {
    const other = await fixture(db);
    const foreign = await createEndpoint(db, operator, {
      workspaceId: other.ws.id,
      url: 'https://hooks.example.com/other',
      policy: processConfig().destinationPolicy,
    });
    provoked.add(`404 ${screen.url}${adminPath(`/endpoints/${foreign.id}`)}`);
    const answered = await answerTo('GET', adminPath(`/endpoints/${foreign.id}`), () =>
      page.goto(`${screen.url}/portal/endpoints/${foreign.id}`),
    );
    expect(answered.status()).to.equal(404);
    await page.getByRole('heading', { level: 1, name: 'Endpoint not found' }).waitFor();
    await page.getByText(/not found in this workspace/).waitFor();
    expect(await page.content()).not.to.include('hooks.example.com/other');
  });

  it('shows an endpoint deleted meanwhile as not found at the next refresh', async () => {
    const gone = await createEndpoint(db, operator, {
      workspaceId: workspace.id,
      url: receiver.endpointUrl(),
      name: 'Gone soon',
      policy: processConfig().destinationPolicy,
    });
    await page.goto(`${screen.url}/portal/endpoints/${gone.id}`);
    await page.getByRole('heading', { level: 1, name: 'Gone soon' }).waitFor();
    await db('webhook_endpoints').where({ id: gone.id }).update({ deleted_at: db.fn.now() });
    provoked.add(`404 ${screen.url}${adminPath(`/endpoints/${gone.id}`)}`);
    await page.getByRole('heading', { level: 1, name: 'Endpoint not found' }).waitFor({ timeout: 12_000 });
  });

  it('refuses a write without the CSRF token (403 csrf) and changes nothing', async () => {
    await page.goto(`${screen.url}/portal/keys`);
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    const keys = await db('api_keys').where({ workspace_id: workspace.id }).count<{ count: string }[]>();
    provoked.add(`403 ${screen.url}${adminPath('/api-keys')}`);
    provoked.add(`403 ${screen.url}${adminPath('')}`);
    // From the page itself, with its cookie, without the header.
    const fromPage = await page.evaluate(async (url) => {
      const response = await fetch(url, {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json' },
        body: '{"role":"forged"}',
      });
      return { status: response.status, body: await response.json() };
    }, adminPath('/api-keys'));
    expect(fromPage.status).to.equal(403);
    expect(fromPage.body.error).to.include({ code: 'forbidden', reason: 'csrf' });
    // From the browser's context (its cookie), a settings change without the header.
    const patched = await page.request.patch(`${screen.url}${adminPath('')}`, { data: { remindersAhead: 2 } });
    expect(patched.status()).to.equal(403);
    expectDocumented(SCREEN_API, 'PATCH', adminPath(''), {
      status: patched.status(),
      headers: new Headers(patched.headers()),
      body: await patched.json(),
    });
    expect(await db('api_keys').where({ workspace_id: workspace.id }).count<{ count: string }[]>()).to.deep.equal(keys);
    expect((await db('workspaces').where({ id: workspace.id }).first()).reminders_ahead).to.equal(9);
  });

  it('offers no change in a read-only session, and shows it is read only', async () => {
    const readOnly = await screen.link(workspace.id, { readOnly: true });
    const other = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const viewer = watch(await other.newPage());
    await viewer.goto(readOnly.url);
    await viewer.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    await viewer.getByText('Read only', { exact: true }).waitFor();
    expect(await viewer.getByRole('link', { name: 'Add endpoint' }).count()).to.equal(0);
    await viewer.getByRole('link', { name: 'Accounting sync' }).click();
    await viewer.getByRole('heading', { level: 1, name: 'Accounting sync' }).waitFor();
    await viewer.getByRole('img', { name: /^Attempts by outcome/ }).waitFor();
    expect(await viewer.getByRole('button').allTextContents()).to.deep.equal([
      'Sign out',
      'Last 24 hours',
      'Last 7 days',
    ]);
    expect(await viewer.getByRole('textbox').count()).to.equal(0);
    await viewer.goto(`${screen.url}/portal/keys`);
    await viewer.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    expect(await viewer.getByRole('button', { name: /Create key|Revoke/ }).count()).to.equal(0);
    await other.close();
  });

  it('offers no change for a frozen workspace (its sessions write nothing), and says it is frozen', async () => {
    const frozen = await fixture(db);
    await createEndpoint(db, operator, {
      workspaceId: frozen.ws.id,
      url: receiver.endpointUrl(),
      name: 'Frozen sync',
      policy: processConfig().destinationPolicy,
    });
    await db('workspaces').where({ id: frozen.ws.id }).update({ status: 'frozen' });
    const other = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const viewer = watch(await other.newPage());
    await viewer.goto((await screen.link(frozen.ws.id)).url);
    await viewer.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    await viewer.getByText(/^Frozen: /).waitFor();
    expect(await viewer.getByRole('link', { name: 'Add endpoint' }).count()).to.equal(0);
    await viewer.getByRole('link', { name: 'Frozen sync' }).click();
    await viewer.getByRole('heading', { level: 1, name: 'Frozen sync' }).waitFor();
    expect(await viewer.getByRole('button').allTextContents()).to.deep.equal([
      'Sign out',
      'Last 24 hours',
      'Last 7 days',
    ]);
    await other.close();
  });

  it("asks before replacing the session of another workspace with a link's (another site may have sent the browser there), and keeps the link until asked", async () => {
    const elsewhere = await fixture(db);
    const other = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const viewer = watch(await other.newPage());
    try {
      await viewer.goto((await screen.link(workspace.id)).url);
      await viewer.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
      // A link of another workspace, in the same browser: not opened, the person is asked.
      const theirs = await screen.link(elsewhere.ws.id);
      provoked.add(`409 ${screen.url}/portal/api/session`);
      const asked = viewer.waitForResponse(
        (r) => new URL(r.url()).pathname === '/portal/api/session' && r.request().method() === 'POST',
      );
      await viewer.goto(theirs.url);
      expect((await asked).status()).to.equal(409);
      await viewer.getByRole('heading', { level: 1, name: 'Switch workspace?' }).waitFor();
      await viewer
        .getByText(
          `This browser has the API settings of workspace ${workspace.slug} open. The link you followed is for workspace ${elsewhere.slug}.`,
          { exact: false },
        )
        .waitFor();
      expect(viewer.url()).to.equal(`${screen.url}/portal/`);
      expect(await viewer.getByRole('navigation', { name: 'Settings' }).isVisible()).to.equal(false);
      await shot(viewer, 'switch-workspace', false);
      // Staying keeps the open session; the link is not used up.
      await viewer.getByRole('button', { name: `Stay in ${workspace.slug}` }).click();
      await viewer.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
      await viewer.getByText(`Workspace ${workspace.slug}`, { exact: true }).waitFor();
      expect((await db('portal_sessions').where({ id: theirs.id }).first('started_at')).started_at).to.equal(null);
      // The same link again, and this time the person opens it: the other workspace's session replaces the first.
      await viewer.goto(theirs.url);
      await viewer.getByRole('heading', { level: 1, name: 'Switch workspace?' }).waitFor();
      const opened = viewer.waitForResponse(
        (r) => new URL(r.url()).pathname === '/portal/api/session' && r.request().method() === 'POST',
      );
      await viewer.getByRole('button', { name: `Open ${elsewhere.slug}` }).click();
      expect((await opened).status()).to.equal(201);
      expect((await opened).request().postDataJSON()).to.deep.equal({ key: theirs.key, replace: true });
      await viewer.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
      await viewer.getByText(`Workspace ${elsewhere.slug}`, { exact: true }).waitFor();
      // A link of the same workspace just opens.
      const again = viewer.waitForResponse(
        (r) => new URL(r.url()).pathname === '/portal/api/session' && r.request().method() === 'POST',
      );
      await viewer.goto((await screen.link(elsewhere.ws.id)).url);
      expect((await again).status()).to.equal(201);
      await viewer.getByText(`Workspace ${elsewhere.slug}`, { exact: true }).waitFor();
    } finally {
      await other.close();
    }
  });

  it('edits an endpoint, and deletes one after confirming', async () => {
    const spare = await createEndpoint(db, operator, {
      workspaceId: workspace.id,
      url: receiver.endpointUrl(),
      name: 'Spare',
      policy: processConfig().destinationPolicy,
    });
    await page.goto(`${screen.url}/portal/endpoints/${spare.id}`);
    await page.getByRole('heading', { level: 1, name: 'Spare' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('Spare <i>receiver</i>');
    await page
      .getByRole('group', { name: 'Booking events' })
      .getByRole('checkbox', { name: /^booking\.completed/ })
      .check();
    const edited = await answerTo('PATCH', adminPath(`/endpoints/${spare.id}`), () =>
      page.getByRole('button', { name: 'Save changes' }).click(),
    );
    expect(edited.status()).to.equal(200);
    expect(edited.request().postDataJSON()).to.deep.equal({
      name: 'Spare <i>receiver</i>',
      events: ['booking.completed'],
    });
    await page.getByText('Changes saved.').waitFor();
    await page
      .getByRole('definition')
      .filter({ hasText: /^booking\.completed$/ })
      .waitFor();

    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete "Spare <i>receiver</i>"?' });
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await db('webhook_endpoints').where({ id: spare.id }).first()).deleted_at).to.equal(null);
    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    const deleted = await answerTo('DELETE', adminPath(`/endpoints/${spare.id}`), () =>
      dialog.getByRole('button', { name: 'Delete' }).click(),
    );
    expect(deleted.status()).to.equal(204);
    await page.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    expect(await page.getByRole('link', { name: 'Spare <i>receiver</i>' }).count()).to.equal(0);
    expect((await db('webhook_endpoints').where({ id: spare.id }).first()).deleted_at).to.be.an.instanceOf(Date);
  });

  it("sets an endpoint's rate limit, names a value out of range next to the field, and clears it", async () => {
    const throttled = await createEndpoint(db, operator, {
      workspaceId: workspace.id,
      url: receiver.endpointUrl(),
      name: 'Throttled',
      policy: processConfig().destinationPolicy,
    });
    await page.goto(`${screen.url}/portal/endpoints/${throttled.id}`);
    await page.getByRole('heading', { level: 1, name: 'Throttled' }).waitFor();
    const shown = () => page.getByRole('definition').filter({ hasText: /^(no limit|at most \d+ a second)$/ });
    expect(await shown().textContent()).to.equal('no limit');
    const limit = page.getByRole('spinbutton', { name: 'Rate limit (deliveries a second)' });
    const save = page.getByRole('button', { name: 'Save changes' });
    for (const wrong of ['1001', '0', '2.5']) {
      await limit.fill(wrong);
      await save.click();
      await page.getByText('Enter a whole number from 1 to 1000, or leave it empty for no limit.').waitFor();
      expect(await limit.getAttribute('aria-invalid'), wrong).to.equal('true');
    }
    expect((await db('webhook_endpoints').where({ id: throttled.id }).first('rate_limit')).rate_limit).to.equal(null);
    await limit.fill('10');
    const set = await answerTo('PATCH', adminPath(`/endpoints/${throttled.id}`), () => save.click());
    expect(set.status()).to.equal(200);
    expect(set.request().postDataJSON()).to.deep.equal({ rateLimit: 10 });
    await page.getByText('Changes saved.').waitFor();
    await shown().filter({ hasText: 'at most 10 a second' }).waitFor();
    await limit.fill('');
    const cleared = await answerTo('PATCH', adminPath(`/endpoints/${throttled.id}`), () => save.click());
    expect(cleared.request().postDataJSON()).to.deep.equal({ rateLimit: null });
    await shown().filter({ hasText: 'no limit' }).waitFor();
    expect((await db('webhook_endpoints').where({ id: throttled.id }).first('rate_limit')).rate_limit).to.equal(null);
  });

  it('adds an ed25519 endpoint: its public key shown, no secret; switched to hmac-sha256, its new secret shown once', async () => {
    await nav('Endpoints').click();
    await page.getByRole('link', { name: 'Add endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: 'Add an endpoint' }).waitFor();
    await page.getByLabel('URL').fill(receiver.endpointUrl());
    await page.getByLabel('Name (optional)').fill('Keyed');
    await page.getByLabel('Signature scheme').selectOption('ed25519');
    const created = await answerTo('POST', adminPath('/endpoints'), () =>
      page.getByRole('button', { name: 'Add endpoint' }).click(),
    );
    expect(created.status()).to.equal(201);
    const made = await created.json();
    expect(made).to.include({ signatureScheme: 'ed25519', secret: null });
    await page.getByText(made.publicKey, { exact: true }).waitFor();
    await page.getByText('No signing secret is handed out.').waitFor();
    expect(await page.getByRole('textbox', { name: 'Signing secret' }).count()).to.equal(0);

    await page.getByRole('link', { name: 'Open the endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: 'Keyed' }).waitFor();
    const form = page.locator('form').filter({ has: page.getByRole('heading', { name: 'Signature scheme' }) });
    await form.waitFor();
    // (its secret signs nothing: no form offers to rotate it, only the key pair)
    expect(await page.getByRole('heading', { name: 'Rotate the signing secret' }).count()).to.equal(0);
    await form.getByLabel('Scheme', { exact: true }).selectOption('hmac-sha256');
    await form.getByLabel('Scheme overlap (hours)').fill('0');
    const switched = await answerTo('POST', adminPath(`/endpoints/${made.id}/signature-scheme`), () =>
      form.getByRole('button', { name: 'Switch scheme' }).click(),
    );
    expect(switched.status()).to.equal(200);
    expect(switched.request().postDataJSON()).to.deep.equal({ scheme: 'hmac-sha256', overlapHours: 0 });
    const secret = await form.getByRole('textbox', { name: 'New signing secret' }).inputValue();
    expect(secret)
      .to.match(/^whsec_[0-9A-Za-z]{40}$/)
      .and.equal((await switched.json()).secret);
    // (the page's figures read again, and every answer checked, before the reload)
    await focusIs(page, 'Signed with hmac-sha256, with a new signing secret, shown below this once.');
    await Promise.all(checks);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Keyed' }).waitFor();
    expect(await page.getByRole('textbox', { name: 'New signing secret' }).count()).to.equal(0);
    expect(await page.content()).not.to.include(secret);
    await page.getByRole('heading', { name: 'Rotate the signing secret' }).waitFor();
  });

  it('is usable 360 px wide: no page scrolls sideways', async () => {
    await page.setViewportSize({ width: 360, height: 740 });
    for (const [name, route, heading] of [
      ['endpoints', '/portal/endpoints', 'Webhook endpoints'],
      ['endpoint', `/portal/endpoints/${endpointId}`, 'Accounting sync'],
      ['deliveries', '/portal/deliveries', 'Deliveries'],
      ['keys', '/portal/keys', 'API keys'],
      ['settings', '/portal/settings', 'Settings'],
    ]) {
      await page.goto(`${screen.url}${route}`);
      await page.getByRole('heading', { level: 1, name: heading }).waitFor();
      await page.waitForLoadState('networkidle');
      const wide = await page.evaluate(() =>
        [...document.querySelectorAll('body *')]
          .filter((el) => el.getBoundingClientRect().right > 361)
          .slice(0, 8)
          .map((el) => `${el.tagName}.${el.className} ${Math.round(el.getBoundingClientRect().right)}`),
      );
      expect(
        await page.evaluate(() => document.documentElement.scrollWidth),
        `${route} is wider than the screen: ${wide.join(', ')}`,
      ).to.be.at.most(360);
      await shot(page, `360-${name}`);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('works in a frame on a site FRS_PORTAL_FRAME_ANCESTORS lists (a partitioned cookie), and is refused by a site it does not', async () => {
    const host = await hostPage();
    const embeddable = await startScreen({ frameAncestors: [host.origin] });
    // A browser of its own that blocks third-party cookies as Chrome's phase-out does: the embedded screen must hold its
    // session with the partitioned cookie alone. Closing it closes its connections, so the screens' servers can close.
    const blocking = await chromium.launch({
      executablePath: CHROMIUM,
      args: [...FLAGS, '--test-third-party-cookie-phaseout'],
    });
    const framing = await blocking.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const framedRequests: string[] = [];
      const embedded = watch(await framing.newPage(), framedRequests);
      const framed = await embeddable.link(workspace.id);
      const sessionAnswer = embedded.waitForResponse(
        (r) => new URL(r.url()).pathname === '/portal/api/session' && r.request().method() === 'POST',
      );
      await embedded.goto(`${host.origin}/?src=${encodeURIComponent(framed.url)}`);
      const setCookie = (await (await sessionAnswer).allHeaders())['set-cookie'];
      expect(setCookie)
        .to.match(/; SameSite=None/i)
        .and.match(/; Secure/i)
        .and.match(/; Partitioned/i)
        .and.match(/; HttpOnly/i);
      const frame = embedded.frameLocator('iframe[title="API settings"]');
      await frame.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
      // The session holds in the frame: the next page's calls carry the partitioned cookie.
      await frame.getByRole('link', { name: 'API keys' }).click();
      await frame.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
      // Third-party cookies are blocked in this browser: in the frame, a cookie without Partitioned is dropped, one
      // with it kept (so the session above held by its partition alone).
      const inFrame = embedded.frames().find((f) => f.url().startsWith(`${embeddable.url}/portal/`))!;
      const kept = await inFrame.evaluate(() => {
        document.cookie = 'unpartitioned=1; Path=/portal/; SameSite=None; Secure';
        document.cookie = 'partitioned=1; Path=/portal/; SameSite=None; Secure; Partitioned';
        return document.cookie;
      });
      expect(kept).to.include('partitioned=1').and.not.include('unpartitioned=1');
      await shot(embedded, 'embedded', false);
      await embedded.close();

      // The screen that does not list the host refuses to be framed there: the browser shows nothing of it.
      const refused = watch(await framing.newPage(), framedRequests);
      const refusal = refused.waitForEvent('console', (message) => /frame-ancestors/.test(message.text()));
      const notListed = await screen.link(workspace.id);
      await refused.goto(`${host.origin}/?src=${encodeURIComponent(notListed.url)}`);
      expect((await refusal).text()).to.match(
        /^Framing '.*' violates the following Content Security Policy directive: "frame-ancestors 'none'"/,
      );
      expect(
        await refused.frameLocator('iframe[title="API settings"]').getByRole('heading', { level: 1 }).count(),
      ).to.equal(0);
      await refused.close();
      // The refusal is the one console error these pages may log; they reached only the host and the screens.
      const refusals = consoleErrors.filter((e) => /frame-ancestors/.test(e.text));
      expect(refusals).to.have.length(1);
      consoleErrors.splice(consoleErrors.indexOf(refusals[0]), 1);
      expect([...new Set(framedRequests.map((url) => new URL(url).origin))]).to.have.members([
        host.origin,
        embeddable.url,
        screen.url,
      ]);
    } finally {
      await framing.close();
      await blocking.close();
      await embeddable.close();
      await host.close();
    }
  });

  it('signs out (the page then stays signed out), and says so in words when the platform ends a session', async () => {
    const other = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const second = watch(await other.newPage());
    await second.goto((await screen.link(workspace.id)).url);
    await second.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    await second.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'API keys' }).click();
    await second.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();

    // Signing out fails (503): the page says so and keeps its session and its button.
    const sessionUrl = `${screen.url}/portal/api/session`;
    await second.route(sessionUrl, (route) =>
      route.request().method() === 'DELETE'
        ? route.fulfill(fabricate('DELETE', sessionUrl, 503, 'The service is busy.'))
        : route.continue(),
    );
    await second.getByRole('button', { name: 'Sign out' }).click();
    await second.getByRole('alert').filter({ hasText: 'Not signed out: The service is busy. Try again.' }).waitFor();
    expect(await second.getByRole('heading', { level: 1, name: 'Signed out' }).count()).to.equal(0);
    expect(await second.getByRole('heading', { level: 1, name: 'API keys' }).isVisible()).to.equal(true);
    await second.unroute(sessionUrl);

    // A page still loading when the person signs out does not draw over "Signed out": its answer comes after.
    const endpointsUrl = `${screen.url}${adminPath('/endpoints')}`;
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const loading = new Promise<void>((resolve) => {
      void second.route(endpointsUrl, async (route) => {
        const response = await route.fetch();
        resolve();
        await released;
        await route.fulfill({ response });
      });
    });
    await second.getByRole('navigation', { name: 'Settings' }).getByRole('link', { name: 'Endpoints' }).click();
    await loading;
    const out = second.waitForResponse(
      (r) => new URL(r.url()).pathname === '/portal/api/session' && r.request().method() === 'DELETE',
    );
    await second.getByRole('button', { name: 'Sign out' }).click();
    expect((await out).status()).to.equal(204);
    await second.getByRole('heading', { level: 1, name: 'Signed out' }).waitFor();
    const late = second.waitForResponse(endpointsUrl);
    release();
    await (await late).finished();
    await second.waitForTimeout(300);
    expect(await second.getByRole('heading', { level: 1, name: 'Signed out' }).isVisible()).to.equal(true);
    expect(await second.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).count()).to.equal(0);
    provoked.add(`401 ${screen.url}/portal/api/session`);
    await second.reload();
    await second.getByRole('heading', { level: 1, name: 'You are signed out' }).waitFor();
    await other.close();

    // The platform ends the first session (the admin API); the open page learns it at its next refresh.
    await page.goto(`${screen.url}/portal/endpoints`);
    await page.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    const ended = await screen.admin.request(
      'DELETE',
      `/admin/v1/workspaces/${workspace.id}/portal-sessions/${link.id}`,
      { token: screen.adminToken },
    );
    expect(ended.status).to.equal(204);
    provoked.add(`401 ${screen.url}${adminPath('/endpoints')}`);
    await page.getByRole('heading', { level: 1, name: 'Your session has ended' }).waitFor({ timeout: 12_000 });
    await page
      .getByText('Your session has ended. Open the API settings again from your rental platform to start a new one.')
      .waitFor();
    expect(await page.getByRole('navigation', { name: 'Settings' }).isVisible()).to.equal(false);
  });

  it('stops refreshing once the person has been away for the idle limit less a margin, says so, and resumes on a key', async () => {
    const other = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const away = watch(await other.newPage());
    // The page's clock is the test's: 28 minutes pass in a moment (the server's session is not idle meanwhile).
    await away.clock.install();
    await away.goto((await screen.link(workspace.id)).url);
    await away.getByRole('heading', { level: 1, name: 'Webhook endpoints' }).waitFor();
    const endpointsUrl = `${screen.url}${adminPath('/endpoints')}`;
    const refreshes: string[] = [];
    away.on('request', (request) => {
      if (request.url() === endpointsUrl) refreshes.push(request.url());
    });
    // 27 minutes without input (the idle limit is 30, less a margin of 2): the page still refreshes.
    const refreshed = away.waitForRequest(endpointsUrl);
    await away.clock.fastForward('27:00');
    await refreshed;
    // 29 minutes: it stops, and says why and when the session ends.
    await away.clock.fastForward('02:00');
    const note = away.getByRole('status').filter({
      hasText:
        /^This page stopped refreshing because it has not been used for 29 minutes\. Your session ends at .+ unless you use the page: press a key or click anywhere to resume refreshing\.$/,
    });
    await note.waitFor();
    const before = refreshes.length;
    for (let i = 0; i < 3; i++) await away.clock.fastForward('00:06');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(refreshes.length, 'refreshed while the person was away').to.equal(before);
    // A key: refreshing resumes at once.
    const resumed = away.waitForResponse(endpointsUrl);
    await away.keyboard.press('Shift');
    await (await resumed).finished();
    await note.waitFor({ state: 'hidden' });
    await other.close();
  });

  it("made no request off the service's origin, logged no console error but those provoked, and every answer was documented", async () => {
    await Promise.all(checks);
    const origins = [...new Set(requested.map((url) => new URL(url).origin))];
    expect(origins, 'every request stays on the service').to.deep.equal([screen.url]);
    const unexpected = consoleErrors.filter((e) => {
      const failed = /^Failed to load resource: the server responded with a status of (\d{3})/.exec(e.text);
      return !(failed && provoked.has(`${failed[1]} ${e.url}`));
    });
    expect(unexpected, 'console errors').to.deep.equal([]);
    expect(checks.length).to.be.at.least(30);
    for (const file of shots) expect(fs.statSync(file).size, file).to.be.greaterThan(10_000);
  });
});

/** A page of "the rental platform" on another origin (localhost, while the service is 127.0.0.1) framing a link. */
async function hostPage(): Promise<{ origin: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const src = new URL(req.url ?? '/', 'http://x').searchParams.get('src') ?? '';
    const escaped = src.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(
      `<!doctype html><html lang="en"><head><title>Rental platform</title><link rel="icon" href="data:,"></head><body><h1>Rental platform</h1><iframe title="API settings" src="${escaped}" width="1200" height="800"></iframe></body></html>`,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://localhost:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
