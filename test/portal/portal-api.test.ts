import crypto from 'node:crypto';
import { expect } from 'chai';
import { testDatabase } from '../support/database.js';
import { createWorkspace } from '../../src/core/workspaces.js';
import { createEndpoint } from '../../src/core/webhooks/endpoints.js';
import { PORTAL_IDLE_MINUTES } from '../../src/core/portal-sessions.js';
import { ConfigError, portalSettingsFromEnv } from '../../src/config.js';
import { PORTAL_API, startScreen, type TestScreen } from './support.js';
import { fleetAdminOn } from '../support/cli.js';
import { createAdminToken, revokeAdminToken } from '../../src/core/admin-tokens.js';
import { cliAudit } from '../../src/core/audit.js';
import { idOf, operator, operatorWith, FIXTURE_ACTOR } from '../support/actors.js';
import { processConfig } from '../../src/config.js';

// The settings screen's session and API over HTTP (the pages themselves: portal-browser.test.ts). A link is a one-time
// key; the session is an HttpOnly cookie confined to its workspace; writes need the CSRF token; every change is audited
// with the session as actor; sessions end by expiry, idleness, the admin API or signing out.

const T0 = Date.parse('2026-03-10T09:00:00.000Z');
const MINUTE = 60_000;
const sha256 = (text: string) => crypto.createHash('sha256').update(text).digest();

describe('the settings screen: sessions and API', function () {
  this.timeout(60_000);
  let screen: TestScreen;
  let now = T0;
  const ws = async () =>
    createWorkspace((await testDatabase()).db, operator, { slug: `portal-${crypto.randomUUID().slice(0, 12)}` });
  const api = (workspaceId: string, rest = '') => `${PORTAL_API}/admin/v1/workspaces/${workspaceId}${rest}`;

  before(async () => {
    screen = await startScreen({ clock: () => new Date(now) });
  });
  after(async () => screen?.close());
  beforeEach(() => {
    now = T0;
  });

  it('makes a one-time link whose key is stored only as its hash, and opens it once into an HttpOnly Lax browser-session cookie', async () => {
    const { db } = await testDatabase();
    const w = await ws();
    const made = await screen.admin.request('POST', `/admin/v1/workspaces/${w.id}/portal-sessions`, {
      token: screen.adminToken,
      body: { expiresInMinutes: 90 },
    });
    expect(made.status).to.equal(201);
    expect(made.body).to.include({
      readOnly: false,
      linkExpiresAt: new Date(T0 + 10 * MINUTE).toISOString(),
      expiresAt: new Date(T0 + 90 * MINUTE).toISOString(),
    });
    expect(made.body.url).to.match(new RegExp(`^${screen.url}/portal/#key=frpl_[0-9A-Za-z]{40}$`));
    const key = new URL(made.body.url).hash.slice('#key='.length);
    const row = await db('portal_sessions').where({ id: made.body.id }).first();
    expect(row.link_hash.equals(sha256(key))).to.equal(true);
    expect(JSON.stringify(row)).not.to.include(key.slice(5));

    now = T0 + 2 * MINUTE;
    const opened = await screen.request('POST', `${PORTAL_API}/session`, { body: { key } });
    expect(opened.status).to.equal(201);
    expect(opened.body).to.deep.include({
      id: made.body.id,
      readOnly: false,
      expiresAt: new Date(T0 + 90 * MINUTE).toISOString(),
      idleExpiresAt: new Date(T0 + 2 * MINUTE + PORTAL_IDLE_MINUTES * MINUTE).toISOString(),
      idleTimeoutMinutes: 30,
    });
    expect(opened.body.workspace).to.deep.equal({
      id: w.id,
      slug: w.slug,
      status: 'active',
      timezone: w.timezone,
      remindersAhead: w.remindersAhead,
    });
    // For the browser session only (no Max-Age or Expires): the server ends the session, a closed browser keeps nothing.
    const setCookie = opened.headers.get('set-cookie')!;
    expect(setCookie).to.match(/^frs_portal=frps_[0-9A-Za-z]{40}; Path=\/portal\/; HttpOnly; SameSite=Lax$/);
    const token = setCookie.slice('frs_portal='.length).split(';')[0];
    const started = await db('portal_sessions').where({ id: made.body.id }).first();
    expect(started.link_hash).to.equal(null);
    expect(started.session_hash.equals(sha256(token))).to.equal(true);
    // The page's answer: the strict policy, no framing by default.
    expect(opened.headers.get('content-security-policy')).to.equal(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    );
    expect(opened.headers.get('x-frame-options')).to.equal('DENY');

    // A second opening, or a made-up key, is the same 401 and starts nothing.
    for (const again of [key, `frpl_${'A'.repeat(40)}`, 'not-a-key']) {
      const refused = await screen.request('POST', `${PORTAL_API}/session`, { body: { key: again } });
      expect(refused.status).to.equal(401);
      expect(refused.body.error).to.include({ code: 'unauthorized', reason: 'link' });
      expect(refused.headers.get('set-cookie')).to.equal(null);
    }
    const audit = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ workspace_id: w.id })
      .orderBy('at')
      .select('actor_type', 'actor_id', 'action', 'target_id');
    expect(audit).to.deep.equal([
      {
        actor_type: 'admin_token',
        actor_id: audit[0].actor_id,
        action: 'portal_session.create',
        target_id: made.body.id,
      },
      { actor_type: 'portal_session', actor_id: made.body.id, action: 'portal_session.start', target_id: made.body.id },
    ]);
    // No key, token or CSRF token in any log line.
    const logged = JSON.stringify(screen.logs) + JSON.stringify(screen.admin.logs);
    for (const secret of [key, token, opened.body.csrfToken]) expect(logged).not.to.include(secret);
  });

  it("refuses a link opened after its expiry: 10 minutes after it was made, or its session's end if sooner", async () => {
    const w = await ws();
    const short = await screen.link(w.id, { expiresInMinutes: 5 });
    const long = await screen.link(w.id, { expiresInMinutes: 60 });
    const onTime = await screen.link(w.id, { expiresInMinutes: 60 });
    now = T0 + 5 * MINUTE;
    const refused = await screen.request('POST', `${PORTAL_API}/session`, { body: { key: short.key } });
    expect([refused.status, refused.body.error.reason]).to.deep.equal([401, 'link']);
    now = T0 + 10 * MINUTE - 1;
    expect((await screen.open(onTime.key)).session.expiresAt).to.equal(new Date(T0 + 60 * MINUTE).toISOString());
    now = T0 + 10 * MINUTE;
    expect((await screen.request('POST', `${PORTAL_API}/session`, { body: { key: long.key } })).status).to.equal(401);
    const listed = await screen.admin.request('GET', `/admin/v1/workspaces/${w.id}/portal-sessions`, {
      token: screen.adminToken,
    });
    expect(listed.body.rows.map((r: { id: string }) => r.id)).to.deep.equal([onTime.id]);
  });

  it("a frozen workspace's session shows everything and changes nothing", async () => {
    const { db } = await testDatabase();
    const w = await ws();
    const { cookie, session } = await screen.open((await screen.link(w.id)).key);
    await db('workspaces').where({ id: w.id }).update({ status: 'frozen' });
    expect((await screen.request('GET', api(w.id, '/api-keys'), { cookie })).status).to.equal(200);
    const refused = await screen.request('POST', api(w.id, '/api-keys'), { cookie, csrf: session.csrfToken, body: {} });
    expect([refused.status, refused.body.error.reason]).to.deep.equal([403, 'frozen']);
    expect(await db('api_keys').where({ workspace_id: w.id }).select('id')).to.deep.equal([]);
  });

  it('as the admin role, may not change what a session is (its workspace, read-only flag or end) nor read it back as the worker', async () => {
    const database = await testDatabase();
    const w = await ws();
    const link = await screen.link(w.id, { readOnly: true });
    for (const change of [
      { read_only: false },
      { workspace_id: (await ws()).id },
      { expires_at: new Date(T0 + 9e9) },
    ]) {
      const error = await database
        .forRole('admin')('portal_sessions')
        .where({ id: link.id })
        .update(change)
        .catch((err: Error) => err);
      expect(String(error), JSON.stringify(change)).to.match(/permission denied/);
    }
    const error = await database
      .forRole('worker')('portal_sessions')
      .where({ id: link.id })
      .update({ expires_at: new Date(T0 + 9e9) })
      .catch((err: Error) => err);
    expect(String(error)).to.match(/permission denied/);
    expect(
      String(
        await database
          .forRole('worker')('portal_sessions')
          .select('link_hash')
          .catch((err: Error) => err),
      ),
    ).to.match(/permission denied/);
  });

  it("answers within its workspace only: another workspace, or another workspace's endpoint, is 404", async () => {
    const { db } = await testDatabase();
    const [mine, theirs] = [await ws(), await ws()];
    const ownEndpoint = await createEndpoint(db, operator, {
      workspaceId: await idOf(db, mine.slug),
      url: 'https://mine.example/hook',
      policy: processConfig().destinationPolicy,
    });
    const foreign = await createEndpoint(db, operator, {
      workspaceId: await idOf(db, theirs.slug),
      url: 'https://theirs.example/hook',
      policy: processConfig().destinationPolicy,
    });
    const { cookie } = await screen.open((await screen.link(mine.id)).key);

    const listed = await screen.request('GET', api(mine.id, '/endpoints'), { cookie });
    expect(listed.status).to.equal(200);
    expect(listed.body.rows.map((r: { id: string }) => r.id)).to.deep.equal([ownEndpoint.id]);
    for (const path of [
      api(theirs.id, '/endpoints'),
      api(theirs.id),
      api(mine.id, `/endpoints/${foreign.id}`),
      api(theirs.id, `/endpoints/${foreign.id}`),
      api(mine.id, `/endpoints/${foreign.id}/attempt-stats`),
    ]) {
      const res = await screen.request('GET', path, { cookie });
      expect(res.status, path).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
    // Operations the screen has no part in are no route for it, even with a good session: listing or making
    // workspaces, publishing events, reading the audit trail, making more links.
    const csrf = (await screen.request('GET', `${PORTAL_API}/session`, { cookie })).body.csrfToken;
    for (const [method, path, body] of [
      ['GET', `${PORTAL_API}/admin/v1/workspaces`, undefined],
      ['POST', `${PORTAL_API}/admin/v1/workspaces`, { slug: 'nope-nope' }],
      ['GET', `${PORTAL_API}/admin/v1/audit-entries`, undefined],
      ['POST', api(mine.id, '/events'), { event: 'booking.confirmed', data: {} }],
      ['POST', api(mine.id, '/portal-sessions'), {}],
      ['GET', api(mine.id, '/portal-sessions'), undefined],
    ] as const) {
      const res = await screen.request(method, path, { cookie, csrf, body });
      expect(res.status, `${method} ${path}`).to.equal(404);
    }
    // And without a session, nothing at all.
    const anonymous = await screen.request('GET', api(mine.id, '/endpoints'));
    expect([anonymous.status, anonymous.body.error.reason]).to.deep.equal([401, 'missing']);
  });

  it("needs the session's CSRF token for every write, changes nothing without it, and audits the change with the session as actor", async () => {
    const { db } = await testDatabase();
    const w = await ws();
    const { cookie, session } = await screen.open((await screen.link(w.id)).key);
    const other = await screen.open((await screen.link(w.id)).key);
    for (const csrf of [undefined, 'x', other.session.csrfToken]) {
      const refused = await screen.request('POST', api(w.id, '/api-keys'), {
        cookie,
        csrf,
        body: { role: 'reporting' },
      });
      expect(refused.status).to.equal(403);
      expect(refused.body.error).to.include({ code: 'forbidden', reason: 'csrf' });
    }
    expect(await db('api_keys').where({ workspace_id: w.id }).count('* as n')).to.deep.equal([{ n: 0 }]);
    const made = await screen.request('POST', api(w.id, '/api-keys'), {
      cookie,
      csrf: session.csrfToken,
      body: { role: 'reporting' },
    });
    expect(made.status).to.equal(201);
    expect(made.body.key).to.match(/^frs_/);
    const entry = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ workspace_id: w.id, action: 'api_key.create' })
      .first();
    expect(entry).to.include({
      actor_type: 'portal_session',
      actor_id: session.id,
      actor_name: 'settings screen (link by platform backend)',
    });
    // The settings the screen changes: time zone and reminders; the status is the platform's.
    const status = await screen.request('PATCH', api(w.id), {
      cookie,
      csrf: session.csrfToken,
      body: { status: 'frozen' },
    });
    expect([status.status, status.body.error.reason]).to.deep.equal([403, 'status']);
    const settings = await screen.request('PATCH', api(w.id), {
      cookie,
      csrf: session.csrfToken,
      body: { timezone: 'Europe/Lisbon', remindersAhead: 7 },
    });
    expect(settings.status, JSON.stringify(screen.logs.filter((l) => l.level === 50))).to.equal(200);
    expect(settings.body).to.include({ status: 'active', timezone: 'Europe/Lisbon', remindersAhead: 7 });
    // Idempotency-Key is not the screen's: a repeat makes a second key, as documented.
    const repeated = await screen.request('POST', api(w.id, '/api-keys'), {
      cookie,
      csrf: session.csrfToken,
      body: {},
      headers: { 'idempotency-key': 'k1' },
    });
    const again = await screen.request('POST', api(w.id, '/api-keys'), {
      cookie,
      csrf: session.csrfToken,
      body: {},
      headers: { 'idempotency-key': 'k1' },
    });
    expect(repeated.body.id).not.to.equal(again.body.id);
  });

  it('a read-only session shows everything and changes nothing', async () => {
    const { db } = await testDatabase();
    const w = await ws();
    const endpoint = await createEndpoint(db, operator, {
      workspaceId: await idOf(db, w.slug),
      url: 'https://ro.example/hook',
      policy: processConfig().destinationPolicy,
    });
    const { cookie, session } = await screen.open((await screen.link(w.id, { readOnly: true })).key);
    expect(session.readOnly).to.equal(true);
    expect((await screen.request('GET', api(w.id, `/endpoints/${endpoint.id}`), { cookie })).status).to.equal(200);
    expect((await screen.request('GET', api(w.id, '/deliveries'), { cookie })).status).to.equal(200);
    for (const [method, path, body] of [
      ['POST', api(w.id, '/api-keys'), {}],
      ['POST', api(w.id, `/endpoints/${endpoint.id}/disable`), undefined],
      ['DELETE', api(w.id, `/endpoints/${endpoint.id}`), undefined],
      ['PATCH', api(w.id), { remindersAhead: 9 }],
    ] as const) {
      const res = await screen.request(method, path, { cookie, csrf: session.csrfToken, body });
      expect([res.status, res.body.error.reason], `${method} ${path}`).to.deep.equal([403, 'read_only']);
    }
    expect(await db('webhook_endpoints').where({ id: endpoint.id }).first('is_active', 'deleted_at')).to.deep.equal({
      is_active: true,
      deleted_at: null,
    });
  });

  it('ends a session at its absolute end, after 30 idle minutes, when the admin API ends it, and on signing out', async () => {
    const w = await ws();
    const get = (cookie: string) => screen.request('GET', `${PORTAL_API}/session`, { cookie });
    // Absolute: 10 minutes, used every minute.
    const short = await screen.open((await screen.link(w.id, { expiresInMinutes: 10 })).key);
    for (let minute = 1; minute < 10; minute++) {
      now = T0 + minute * MINUTE;
      expect((await get(short.cookie)).status, `minute ${minute}`).to.equal(200);
    }
    now = T0 + 10 * MINUTE;
    expect((await get(short.cookie)).body.error.reason).to.equal('expired');

    // Idle: a request at 29 minutes keeps it; 30 minutes after that one, it has ended.
    now = T0;
    const idle = await screen.open((await screen.link(w.id, { expiresInMinutes: 240 })).key);
    now = T0 + 29 * MINUTE;
    expect((await get(idle.cookie)).body.idleExpiresAt).to.equal(new Date(T0 + 59 * MINUTE).toISOString());
    now = T0 + 59 * MINUTE - 1;
    expect((await get(idle.cookie)).status).to.equal(200);
    const quiet = await screen.open((await screen.link(w.id, { expiresInMinutes: 240 })).key);
    now = T0 + 59 * MINUTE - 1 + PORTAL_IDLE_MINUTES * MINUTE;
    expect((await get(quiet.cookie)).body.error.reason).to.equal('expired');

    // Ended by the admin API: one, then all; the list shows what is live.
    now = T0;
    const a = await screen.link(w.id);
    now += 1000;
    const b = await screen.link(w.id);
    now += 1000;
    const c = await screen.link(w.id);
    const opened = [await screen.open(a.key), await screen.open(b.key)];
    const listed = await screen.admin.request('GET', `/admin/v1/workspaces/${w.id}/portal-sessions`, {
      token: screen.adminToken,
    });
    expect(
      listed.body.rows
        .filter((r: { id: string }) => [a.id, b.id, c.id].includes(r.id))
        .map((r: { id: string; state: string }) => [r.id, r.state]),
    ).to.deep.equal([
      [c.id, 'unused'],
      [b.id, 'active'],
      [a.id, 'active'],
    ]);
    expect(
      (
        await screen.admin.request('DELETE', `/admin/v1/workspaces/${w.id}/portal-sessions/${a.id}`, {
          token: screen.adminToken,
        })
      ).status,
    ).to.equal(204);
    expect((await get(opened[0].cookie)).body.error.reason).to.equal('ended');
    expect((await get(opened[1].cookie)).status).to.equal(200);
    const ended = await screen.admin.request('POST', `/admin/v1/workspaces/${w.id}/portal-sessions/end`, {
      token: screen.adminToken,
    });
    // b, c, and the idle-limited session still within its 240 minutes at T0 (its last request was later than T0)
    expect(ended.body.ended).to.be.at.least(2);
    expect((await get(opened[1].cookie)).body.error.reason).to.equal('ended');
    expect((await screen.request('POST', `${PORTAL_API}/session`, { body: { key: c.key } })).status).to.equal(401);
    // Another workspace's session id is not found.
    const elsewhere = await ws();
    expect(
      (
        await screen.admin.request('DELETE', `/admin/v1/workspaces/${elsewhere.id}/portal-sessions/${b.id}`, {
          token: screen.adminToken,
        })
      ).status,
    ).to.equal(404);

    // Signing out: needs the CSRF token, clears the cookie, ends the session.
    const mine = await screen.open((await screen.link(w.id)).key);
    expect((await screen.request('DELETE', `${PORTAL_API}/session`, { cookie: mine.cookie })).status).to.equal(403);
    const out = await screen.request('DELETE', `${PORTAL_API}/session`, {
      cookie: mine.cookie,
      csrf: mine.session.csrfToken,
    });
    expect(out.status).to.equal(204);
    expect(out.headers.get('set-cookie')).to.equal('frs_portal=; Path=/portal/; Max-Age=0; HttpOnly; SameSite=Lax');
    expect((await get(mine.cookie)).body.error.reason).to.equal('ended');
  });

  it('asks before replacing a session of another workspace: 409 naming both, the key unspent, until "replace": true', async () => {
    const { db } = await testDatabase();
    const [mine, theirs] = [await ws(), await ws()];
    const open = await screen.open((await screen.link(mine.id)).key);
    const theirLink = await screen.link(theirs.id);
    const post = (body: unknown, cookie?: string) => screen.request('POST', `${PORTAL_API}/session`, { body, cookie });

    // Another site may have sent this browser to a link of its own (login CSRF): not opened, nothing changed.
    const asked = await post({ key: theirLink.key }, open.cookie);
    expect(asked.status).to.equal(409);
    expect(asked.body.error).to.include({ code: 'conflict', reason: 'replace' });
    expect(asked.body.error.message)
      .to.include(`workspace "${mine.slug}" open`)
      .and.include(`for workspace "${theirs.slug}"`);
    expect(asked.body.openWorkspace).to.deep.equal({ id: mine.id, slug: mine.slug });
    expect(asked.body.linkWorkspace).to.deep.equal({ id: theirs.id, slug: theirs.slug });
    expect(asked.headers.get('set-cookie')).to.equal(null);
    expect(await db('portal_sessions').where({ id: theirLink.id }).first('started_at', 'ended_at')).to.deep.equal({
      started_at: null,
      ended_at: null,
    });
    expect((await screen.request('GET', `${PORTAL_API}/session`, { cookie: open.cookie })).body.workspace.id).to.equal(
      mine.id,
    );
    expect((await post({ key: theirLink.key, replace: 'yes' }, open.cookie)).body.error).to.include({
      code: 'invalid_request',
      reason: 'replace',
    });

    // Confirmed: the link opens, and the session it replaces ends.
    now = T0 + MINUTE;
    const replaced = await post({ key: theirLink.key, replace: true }, open.cookie);
    expect(replaced.status).to.equal(201);
    expect(replaced.body.workspace.id).to.equal(theirs.id);
    expect((await screen.request('GET', `${PORTAL_API}/session`, { cookie: open.cookie })).body.error.reason).to.equal(
      'ended',
    );
    const audit = await db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ target_id: open.session.id, action: 'portal_session.end' })
      .select('actor_type', 'actor_id', 'at');
    expect(audit).to.deep.equal([{ actor_type: 'portal_session', actor_id: open.session.id, at: audit[0].at }]);
    const theirCookie = replaced.headers.get('set-cookie')!.split(';')[0];

    // The same workspace: no question, the new session replaces the old one.
    const again = await post({ key: (await screen.link(theirs.id)).key }, theirCookie);
    expect([again.status, again.body.workspace.id]).to.deep.equal([201, theirs.id]);
    expect((await screen.request('GET', `${PORTAL_API}/session`, { cookie: theirCookie })).body.error.reason).to.equal(
      'ended',
    );
    // A cookie whose session ended is no session to keep: another workspace's link just opens.
    expect((await post({ key: (await screen.link(mine.id)).key }, theirCookie)).status).to.equal(201);
  });

  it('over https, names the cookie __Host-frs_portal (Secure, Path=/, no Domain) and reads no other', async () => {
    const secure = await startScreen({ publicUrl: 'https://rental-api.example' });
    try {
      const w = await ws();
      const opened = await secure.request('POST', `${PORTAL_API}/session`, {
        body: { key: (await secure.link(w.id)).key },
      });
      const setCookie = opened.headers.get('set-cookie')!;
      expect(setCookie).to.match(/^__Host-frs_portal=frps_[0-9A-Za-z]{40}; Path=\/; HttpOnly; SameSite=Lax; Secure$/);
      const token = setCookie.split(';')[0].slice('__Host-frs_portal='.length);
      expect(
        (await secure.request('GET', `${PORTAL_API}/session`, { cookie: `__Host-frs_portal=${token}` })).status,
      ).to.equal(200);
      // The unprefixed name (which another host of the site could set) is not read.
      expect(
        (await secure.request('GET', `${PORTAL_API}/session`, { cookie: `frs_portal=${token}` })).body.error.reason,
      ).to.equal('missing');
      const out = await secure.request('DELETE', `${PORTAL_API}/session`, {
        cookie: `__Host-frs_portal=${token}`,
        csrf: opened.body.csrfToken,
      });
      expect(out.headers.get('set-cookie')).to.equal(
        '__Host-frs_portal=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax; Secure',
      );
    } finally {
      await secure.close();
    }
  });

  it('ends the links and sessions an admin token made when it is revoked, and only those', async () => {
    const database = await testDatabase();
    now = Date.now(); // (the revocation's time is the database's)
    const w = await ws();
    const other = await createAdminToken(database.db, operatorWith(cliAudit()), {
      name: `platform ${crypto.randomUUID().slice(0, 8)}`,
      workspaceId: 'every',
    });
    const made = await screen.open((await screen.link(w.id, { token: other.token })).key);
    const unopened = await screen.link(w.id, { token: other.token });
    const kept = await screen.open((await screen.link(w.id)).key);
    const get = (cookie: string) => screen.request('GET', `${PORTAL_API}/session`, { cookie });
    expect((await get(made.cookie)).status).to.equal(200);
    expect(
      (await database.db('portal_sessions').where({ id: made.session.id }).first('admin_token_id')).admin_token_id,
    ).to.equal(other.id);

    await revokeAdminToken(database.db, operatorWith(cliAudit()), { id: other.id });
    expect((await get(made.cookie)).body.error.reason).to.equal('ended');
    expect(
      (await screen.request('POST', `${PORTAL_API}/session`, { body: { key: unopened.key } })).body.error.reason,
    ).to.equal('link');
    expect((await get(kept.cookie)).status).to.equal(200);
    const ended = await database
      .db('portal_sessions')
      .whereIn('id', [made.session.id, unopened.id])
      .whereNotNull('ended_at')
      .pluck('id');
    expect(ended).to.have.members([made.session.id, unopened.id]);
    expect(
      await database
        .db('audit_entries')
        .whereNot({ actor_name: FIXTURE_ACTOR })
        .where({ action: 'portal_session.end', actor_type: 'cli' })
        .whereIn('target_id', [made.session.id, unopened.id])
        .pluck('target_id'),
    ).to.have.members([made.session.id, unopened.id]);

    // A link made by a request that raced the revocation (its row not ended) opens nothing, and its session is refused.
    const racing = await createAdminToken(database.db, operatorWith(cliAudit()), {
      name: `racing ${crypto.randomUUID().slice(0, 8)}`,
      workspaceId: 'every',
    });
    const raced = await screen.open((await screen.link(w.id, { token: racing.token })).key);
    const racedLink = await screen.link(w.id, { token: racing.token });
    await database.db('admin_tokens').where({ id: racing.id }).update({ revoked_at: new Date() });
    const refused = await get(raced.cookie);
    expect([refused.status, refused.body.error?.reason]).to.deep.equal([401, 'ended']);
    const unopenable = await screen.request('POST', `${PORTAL_API}/session`, { body: { key: racedLink.key } });
    expect([unopenable.status, unopenable.body.error?.reason]).to.deep.equal([401, 'link']);
  });

  it("counts an endpoint's attempts by outcome per hour over 24 hours and per 6 hours over 7 days", async () => {
    const { db } = await testDatabase();
    const w = await ws();
    const endpoint = await createEndpoint(db, operator, {
      workspaceId: await idOf(db, w.slug),
      url: 'https://stats.example/hook',
      policy: processConfig().destinationPolicy,
    });
    const [{ id: eventId }] = await db('events')
      .insert({ workspace_id: w.id, event: 'webhook.test', data: {}, source: 'test' })
      .returning('id');
    const [{ id: deliveryId }] = await db('deliveries')
      .insert({
        id: crypto.randomUUID(),
        workspace_id: w.id,
        event_id: eventId,
        endpoint_id: endpoint.id,
        event: 'webhook.test',
        body: '{}',
        status: 'accepted',
        attempts: 7,
      })
      .returning('id');
    // now = 2026-03-10T09:00Z + 30 min. Hour buckets: 24 from 2026-03-09T10:00Z to 2026-03-10T09:00Z (holds now).
    now = T0 + 30 * MINUTE;
    const attempts: Array<[string, number | null, string | null]> = [
      ['2026-03-10T09:10:00Z', 200, null], // last hour: succeeded
      ['2026-03-10T09:20:00Z', 500, 'status'], // last hour: failed with a status
      ['2026-03-10T08:59:59Z', null, 'timeout'], // the hour before: no answer
      ['2026-03-10T08:00:00Z', 204, null], // the hour before (its first instant)
      ['2026-03-09T10:00:00Z', null, 'dns'], // the first hour of the 24
      ['2026-03-09T09:59:59Z', 301, 'redirect'], // before the 24 hours; within the 7 days (6-hour bucket 06:00)
      ['2026-03-03T12:00:00Z', 200, null], // the first 6-hour bucket of the 7 days (28 back from 06:00Z today)
      ['2026-03-03T11:59:59Z', 200, null], // before the 7 days
    ];
    let number = 0;
    for (const [at, statusCode, errorKind] of attempts) {
      await db('delivery_attempts').insert({
        delivery_id: deliveryId,
        endpoint_id: endpoint.id,
        number: ++number,
        started_at: at,
        duration_ms: 5,
        status_code: statusCode,
        error_kind: errorKind,
      });
    }
    const { cookie } = await screen.open((await screen.link(w.id)).key);
    const day = await screen.request('GET', api(w.id, `/endpoints/${endpoint.id}/attempt-stats`), { cookie });
    expect(day.status).to.equal(200);
    expect(day.body).to.include({ endpointId: endpoint.id, period: '24h', bucketSeconds: 3600 });
    expect(day.body.buckets).to.have.length(24);
    expect(day.body.buckets[0]).to.deep.equal({
      start: '2026-03-09T10:00:00.000Z',
      succeeded: 0,
      failedStatus: 0,
      failedNoAnswer: 1,
    });
    expect(day.body.buckets[22]).to.deep.equal({
      start: '2026-03-10T08:00:00.000Z',
      succeeded: 1,
      failedStatus: 0,
      failedNoAnswer: 1,
    });
    expect(day.body.buckets[23]).to.deep.equal({
      start: '2026-03-10T09:00:00.000Z',
      succeeded: 1,
      failedStatus: 1,
      failedNoAnswer: 0,
    });
    const total = (buckets: Array<Record<string, number>>) =>
      buckets.reduce((n, b) => n + b.succeeded + b.failedStatus + b.failedNoAnswer, 0);
    expect(total(day.body.buckets)).to.equal(5);

    const week = await screen.admin.request(
      'GET',
      `/admin/v1/workspaces/${w.id}/endpoints/${endpoint.id}/attempt-stats?period=7d`,
      { token: screen.adminToken },
    );
    expect(week.body).to.include({ period: '7d', bucketSeconds: 21600 });
    expect(week.body.buckets).to.have.length(28);
    expect(week.body.buckets[0]).to.deep.equal({
      start: '2026-03-03T12:00:00.000Z',
      succeeded: 1,
      failedStatus: 0,
      failedNoAnswer: 0,
    });
    expect(week.body.buckets[27]).to.deep.equal({
      start: '2026-03-10T06:00:00.000Z',
      succeeded: 2,
      failedStatus: 1,
      failedNoAnswer: 1,
    });
    expect(week.body.buckets[26]).to.deep.equal({
      start: '2026-03-10T00:00:00.000Z',
      succeeded: 0,
      failedStatus: 0,
      failedNoAnswer: 0,
    });
    expect(week.body.buckets[25]).to.deep.equal({
      start: '2026-03-09T18:00:00.000Z',
      succeeded: 0,
      failedStatus: 0,
      failedNoAnswer: 0,
    });
    expect(week.body.buckets[24]).to.deep.equal({
      start: '2026-03-09T12:00:00.000Z',
      succeeded: 0,
      failedStatus: 0,
      failedNoAnswer: 0,
    });
    expect(week.body.buckets[23]).to.deep.equal({
      start: '2026-03-09T06:00:00.000Z',
      succeeded: 0,
      failedStatus: 1,
      failedNoAnswer: 1,
    });
    expect(total(week.body.buckets)).to.equal(7);
    const bad = await screen.request('GET', api(w.id, `/endpoints/${endpoint.id}/attempt-stats?period=1y`), { cookie });
    expect([bad.status, bad.body.error.reason]).to.deep.equal([400, 'period']);
  });

  it('fleet-admin portal link makes a link on FRS_PUBLIC_URL that opens once; portal end ends the sessions, both audited as the CLI', async () => {
    const database = await testDatabase();
    const w = await ws();
    const run = await fleetAdminOn(
      database.url,
      ['portal', 'link', '--workspace', w.slug, '--minutes', '15', '--read-only', '--json'],
      { FRS_PUBLIC_URL: 'https://rental.example' },
    );
    expect([run.code, run.stderr]).to.deep.equal([0, '']);
    const link = JSON.parse(run.stdout);
    expect(Object.keys(link)).to.deep.equal(['id', 'url', 'readOnly', 'linkExpiresAt', 'expiresAt']);
    expect(link.url).to.match(/^https:\/\/rental\.example\/portal\/#key=frpl_[0-9A-Za-z]{40}$/);
    expect(link.readOnly).to.equal(true);
    // (the CLI's clock is the real one: the test's screen is moved to it)
    now = Date.parse(link.expiresAt) - 14 * MINUTE;
    const { cookie, session } = await screen.open(link.url.split('#key=')[1]);
    expect(session).to.include({ id: link.id, readOnly: true });
    const ended = await fleetAdminOn(database.url, ['portal', 'end', '--workspace', w.slug]);
    expect([ended.code, ended.stdout]).to.deep.equal([0, '1 settings-screen session(s) ended\n']);
    expect((await screen.request('GET', `${PORTAL_API}/session`, { cookie })).body.error.reason).to.equal('ended');
    const actions = await database
      .db('audit_entries')
      .whereNot({ actor_name: FIXTURE_ACTOR })
      .where({ workspace_id: w.id })
      .orderBy('at')
      .select('actor_type', 'action');
    expect(actions).to.deep.equal([
      { actor_type: 'cli', action: 'portal_session.create' },
      { actor_type: 'portal_session', action: 'portal_session.start' },
      { actor_type: 'cli', action: 'portal_session.end' },
    ]);
    const bad = await fleetAdminOn(database.url, ['portal', 'link', '--workspace', w.slug, '--minutes', '2']);
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.include('--minutes must be a whole number from 5 to 1440');
  });

  it('is no route on the admin listener, and refuses a body that is not the documented one', async () => {
    const onAdmin = await screen.admin.request('POST', `${PORTAL_API}/session`, { body: { key: 'frpl_x' } });
    expect(onAdmin.status).to.equal(404);
    for (const body of ['[]', '{"key":"a","more":1}', '{"key":5}', 'nope']) {
      const res = await screen.request('POST', `${PORTAL_API}/session`, { body });
      expect(res.status, body).to.equal(400);
    }
    const text = await screen.request('POST', `${PORTAL_API}/session`, {
      body: 'key=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(text.status).to.equal(415);
    // The screen's own session calls are not admin operations it may reach by another path; nor is a path whose
    // operations are all the admin listener's, whatever the method.
    const w = await ws();
    const { cookie, session } = await screen.open((await screen.link(w.id)).key);
    expect((await screen.request('GET', `${PORTAL_API}/portal/api/session`, { cookie })).status).to.equal(404);
    expect(
      (await screen.request('DELETE', `${PORTAL_API}/portal/api/session`, { cookie, csrf: session.csrfToken })).status,
    ).to.equal(404);
    expect(
      (await screen.request('PUT', `${PORTAL_API}/admin/v1/workspaces`, { cookie, csrf: session.csrfToken, body: {} }))
        .status,
    ).to.equal(404);
    expect(
      (await screen.admin.request('PUT', `${PORTAL_API}/session`, { token: screen.adminToken, body: {} })).status,
    ).to.equal(404);
  });
});

describe('the settings screen and the failure limit of client addresses', function () {
  this.timeout(60_000);
  const newWorkspace = async () =>
    createWorkspace((await testDatabase()).db, operator, { slug: `portal-${crypto.randomUUID().slice(0, 12)}` });
  const forged = `frs_portal=frps_${'x'.repeat(40)}`;

  it("counts a cookie that is no session's against the address, but not a request without one (any site can make a browser send that)", async () => {
    const screen = await startScreen({ screenAuthFailures: 3 });
    try {
      const w = await newWorkspace();
      for (let i = 0; i < 10; i++)
        expect((await screen.request('GET', `${PORTAL_API}/session`)).body.error.reason).to.equal('missing');
      // The link still opens: nothing was counted.
      const { cookie } = await screen.open((await screen.link(w.id)).key);
      const answers = [];
      for (let i = 0; i < 4; i++)
        answers.push((await screen.request('GET', `${PORTAL_API}/session`, { cookie: forged })).status);
      expect(answers).to.deep.equal([401, 401, 401, 429]);
      // A good session is still answered (known good to this process), and a missing cookie is still a plain 401.
      expect((await screen.request('GET', `${PORTAL_API}/session`, { cookie })).status).to.equal(200);
    } finally {
      await screen.close();
    }
  });

  it('gives link openings a budget of their own: key-less API requests (which any web page can make a browser send) do not spend it', async () => {
    const screen = await startScreen({ authFailures: { perMinute: 3, trustedProxies: [] }, screenAuthFailures: 2 });
    try {
      const w = await newWorkspace();
      // The API's budget of this address is spent by requests without a key...
      const api = [];
      for (let i = 0; i < 4; i++) api.push((await screen.request('GET', '/v1/vehicles')).status);
      expect(api).to.deep.equal([401, 401, 401, 429]);
      // ...and the link still opens.
      expect(
        (await screen.request('POST', `${PORTAL_API}/session`, { body: { key: (await screen.link(w.id)).key } }))
          .status,
      ).to.equal(201);
      // The screen's own budget: 2 guessed keys, then even a good link waits (429, its key not spent), as the policy says.
      const good = await screen.link(w.id);
      const answers = [];
      for (const key of [`frpl_${'A'.repeat(40)}`, `frpl_${'B'.repeat(40)}`, good.key])
        answers.push(await screen.request('POST', `${PORTAL_API}/session`, { body: { key } }));
      expect(answers.map((a) => a.status)).to.deep.equal([401, 401, 429]);
      expect(answers[2].body.error.reason).to.equal('auth_failures');
      expect(answers[2].headers.get('ratelimit-policy')).to.equal('"auth-failures";q=2;w=60');
      expect(
        (await (await testDatabase()).db('portal_sessions').where({ id: good.id }).first('started_at')).started_at,
      ).to.equal(null);
    } finally {
      await screen.close();
    }
  });

  it('refuses an ended or expired session at once: not counted against the address, and no longer known good once it has failed too often', async () => {
    let now = Date.now();
    const screen = await startScreen({ screenAuthFailures: 3, clock: () => new Date(now) });
    try {
      const w = await newWorkspace();
      const get = (cookie: string) => screen.request('GET', `${PORTAL_API}/session`, { cookie });
      const ended = await screen.open((await screen.link(w.id)).key);
      const expired = await screen.open((await screen.link(w.id, { expiresInMinutes: 5 })).key);
      const live = await screen.open((await screen.link(w.id)).key);
      // Each was good once (known good to this process).
      for (const s of [ended, expired, live]) expect((await get(s.cookie)).status).to.equal(200);
      expect(
        (
          await screen.admin.request('DELETE', `/admin/v1/workspaces/${w.id}/portal-sessions/${ended.session.id}`, {
            token: screen.adminToken,
          })
        ).status,
      ).to.equal(204);
      now += 5 * MINUTE;
      // Refused, and not counted: the browser that holds it may be made to send it by any site.
      for (let i = 0; i < 5; i++) {
        expect((await get(ended.cookie)).body.error.reason).to.equal('ended');
        expect((await get(expired.cookie)).body.error.reason).to.equal('expired');
      }
      const answers = [];
      for (let i = 0; i < 4; i++) answers.push((await get(forged)).status);
      expect(answers).to.deep.equal([401, 401, 401, 429]);
      // The address has failed too often: the ended and expired sessions are refused before any look-up; the live one is not.
      for (const s of [ended, expired]) {
        const refused = await get(s.cookie);
        expect([refused.status, refused.body.error.reason]).to.deep.equal([429, 'auth_failures']);
      }
      expect((await get(live.cookie)).status).to.equal(200);
    } finally {
      await screen.close();
    }
  });
});

describe("the settings screen embedded in the platform's pages (FRS_PORTAL_FRAME_ANCESTORS)", function () {
  this.timeout(60_000);

  it('lets the listed origins frame it and sets a Partitioned SameSite=None Secure cookie', async () => {
    const screen = await startScreen({ frameAncestors: ['https://app.rental.example', 'http://localhost:5173'] });
    try {
      const w = await createWorkspace((await testDatabase()).db, operator, {
        slug: `portal-${crypto.randomUUID().slice(0, 12)}`,
      });
      const opened = await screen.request('POST', `${PORTAL_API}/session`, {
        body: { key: (await screen.link(w.id)).key },
      });
      expect(opened.headers.get('set-cookie')).to.match(
        /^frs_portal=frps_\w+; Path=\/portal\/; HttpOnly; SameSite=None; Secure; Partitioned$/,
      );
      expect(opened.headers.get('content-security-policy')).to.include(
        'frame-ancestors https://app.rental.example http://localhost:5173',
      );
      expect(opened.headers.get('x-frame-options')).to.equal(null);
    } finally {
      await screen.close();
    }
  });

  it('reads its settings from the environment, refusing a bad one with the variable named', () => {
    expect(portalSettingsFromEnv({})).to.deep.equal({
      publicUrl: 'http://localhost:3000',
      publicUrlGiven: false,
      frameAncestors: [],
      authFailuresPerMinute: 30,
    });
    expect(
      portalSettingsFromEnv({
        PORT: '8080',
        FRS_PORTAL_FRAME_ANCESTORS: 'https://a.example, https://*.b.example:8443',
        FRS_PORTAL_AUTH_FAILURE_LIMIT: '0',
      }),
    ).to.deep.equal({
      publicUrl: 'http://localhost:8080',
      publicUrlGiven: false,
      frameAncestors: ['https://a.example', 'https://*.b.example:8443'],
      authFailuresPerMinute: 0,
    });
    expect(portalSettingsFromEnv({ FRS_PUBLIC_URL: 'https://api.example.com' }).publicUrlGiven).to.equal(true);
    // Plain http beyond this machine only when an operator says so.
    expect(portalSettingsFromEnv({ FRS_PUBLIC_URL: 'http://[::1]:3000' }).publicUrl).to.equal('http://[::1]:3000');
    expect(
      portalSettingsFromEnv({ FRS_PUBLIC_URL: 'http://api.internal:3000', FRS_ALLOW_HTTP_PUBLIC_URL: '1' }).publicUrl,
    ).to.equal('http://api.internal:3000');
    expect(() => portalSettingsFromEnv({ FRS_PUBLIC_URL: 'http://api.internal:3000' })).to.throw(
      ConfigError,
      'FRS_PUBLIC_URL must be https for an address other than this machine\'s (the settings screen\'s cookie and links would cross the network in clear), got "http://api.internal:3000"; set FRS_ALLOW_HTTP_PUBLIC_URL=1 to allow it anyway',
    );
    expect(portalSettingsFromEnv({ FRS_PUBLIC_URL: 'https://api.example.com/' }).publicUrl).to.equal(
      'https://api.example.com',
    );
    expect(
      portalSettingsFromEnv({
        FRS_PUBLIC_URL: 'http://127.0.0.1:3000',
        FRS_PORTAL_FRAME_ANCESTORS: 'http://localhost:5173',
      }).frameAncestors,
    ).to.deep.equal(['http://localhost:5173']);
    for (const [env, variable] of [
      [{ FRS_PUBLIC_URL: 'https://api.example.com/base' }, 'FRS_PUBLIC_URL'],
      [{ FRS_PUBLIC_URL: 'ftp://x' }, 'FRS_PUBLIC_URL'],
      [{ FRS_PUBLIC_URL: 'http://10.0.0.5' }, 'FRS_ALLOW_HTTP_PUBLIC_URL'],
      [{ FRS_PUBLIC_URL: 'http://10.0.0.5', FRS_ALLOW_HTTP_PUBLIC_URL: 'yes' }, 'FRS_ALLOW_HTTP_PUBLIC_URL'],
      [{ FRS_PORTAL_AUTH_FAILURE_LIMIT: '-1' }, 'FRS_PORTAL_AUTH_FAILURE_LIMIT'],
      [{ FRS_PORTAL_FRAME_ANCESTORS: '*' }, 'FRS_PORTAL_FRAME_ANCESTORS'],
      [{ FRS_PORTAL_FRAME_ANCESTORS: "https://a.example 'unsafe-inline'" }, 'FRS_PORTAL_FRAME_ANCESTORS'],
      [{ FRS_PORTAL_FRAME_ANCESTORS: 'https://a.example; script-src *' }, 'FRS_PORTAL_FRAME_ANCESTORS'],
      // embedded elsewhere, the cookie must be Secure: an http address other than this machine's is refused
      [{ FRS_PORTAL_FRAME_ANCESTORS: 'https://a.example', FRS_PUBLIC_URL: 'http://api.example.com' }, 'FRS_PUBLIC_URL'],
      [
        {
          FRS_PORTAL_FRAME_ANCESTORS: 'https://a.example',
          FRS_PUBLIC_URL: 'http://api.example.com',
          FRS_ALLOW_HTTP_PUBLIC_URL: '1',
        },
        'FRS_PORTAL_FRAME_ANCESTORS',
      ],
    ] as const) {
      expect(() => portalSettingsFromEnv(env), JSON.stringify(env)).to.throw(ConfigError, variable);
    }
  });
});
