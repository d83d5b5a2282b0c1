// The settings screen: signs in with the link's one-time key, then routes by path under /portal/ (history API; the
// server answers index.html for every such path) and keeps the live pages fresh while they are visible.
import { ApiError, currentSession, endSession, lastAnswered, onSessionEnded, startSession } from './api.js';
import { formatTime, h, replace, setTimeZone } from './dom.js';
import { keysPage } from './keys.js';
import { endpointPage, endpointsPage, newEndpointPage } from './endpoints.js';
import { deliveriesPage, deliveryPage } from './deliveries.js';
import { eventsPage } from './events.js';
import { settingsPage } from './settings.js';

/** How often the live pages (endpoints, deliveries) are refreshed while visible. */
const REFRESH_MS = 5000;
/** The longest wait between refreshes after failures, when the answer gave no Retry-After. */
const MAX_BACKOFF_MS = 5 * 60_000;
/**
 * Background refreshes stop this long before the session's idle limit. Every request counts as activity on the
 * server, so refreshing alone would keep an open, unattended tab's session alive until its absolute end; the server
 * notes activity every 15 s at most, so 2 minutes leaves the idle limit to the person's own use.
 */
const IDLE_MARGIN_MS = 2 * 60_000;

/**
 * @typedef {object} PageContext
 * @property {HTMLElement} main where the page renders
 * @property {Record<string, string>} params path parameters
 * @property {URLSearchParams} search the query string
 * @property {boolean} readOnly a read-only session, or a frozen workspace (whose sessions write nothing): no write is offered
 * @property {(path: string, options?: {replace?: boolean}) => void} navigate
 * @property {(refresh: (options: {background: boolean}) => Promise<void>) => void} live registers what the 5-second refresh calls
 * @property {(title: string) => HTMLElement} heading the page's <h1> (focused after navigation) and document title
 */

/** @type {Array<[RegExp, (ctx: PageContext) => Promise<void>]>} */
const ROUTES = [
  [/^\/portal\/keys$/, keysPage],
  [/^\/portal\/endpoints$/, endpointsPage],
  [/^\/portal\/endpoints\/new$/, newEndpointPage],
  [/^\/portal\/endpoints\/(?<id>[^/]+)$/, endpointPage],
  [/^\/portal\/deliveries$/, deliveriesPage],
  [/^\/portal\/deliveries\/(?<id>[^/]+)$/, deliveryPage],
  [/^\/portal\/events$/, eventsPage],
  [/^\/portal\/settings$/, settingsPage],
];

const main = document.getElementById('main');
/** Why the page is not refreshing (the person is away, or the last refresh failed), in words; hidden otherwise. */
const notice = h('p', { class: 'notice', role: 'status', hidden: true });
main.before(notice);
let refresh = null;
let rendering = 0;
/** The person's last input (key, pointer, focus into a form, navigation): background refresh runs only near it. */
let lastInput = Date.now();
/** Background refresh stopped for inactivity: any input resumes it. */
let paused = false;
/** A refresh in flight (the tick and visibilitychange never run two at once). */
let refreshing = false;
/** After a failed refresh: none before this time (Retry-After, or a doubling back-off). */
let retryAt = 0;
let failures = 0;

function showNotice(text) {
  notice.textContent = text ?? '';
  notice.hidden = !text;
}

/** An error in words: the API's message, or that the service did not answer at all. */
const inWords = (err) => (err instanceof ApiError ? err.message : 'The service cannot be reached.');

/** Words instead of the screen: the link was refused, the session ended, or there is none. */
function showMessage(title, text, ...extra) {
  refresh = null;
  rendering++; // a page still loading must not draw over these words
  showNotice(null);
  document.getElementById('nav').hidden = true;
  replace(document.getElementById('who'));
  document.title = `${title} · API settings`;
  replace(main, h('h1', { tabindex: '-1' }, title), h('p', { class: 'message' }, text), extra);
  main.querySelector('h1').focus();
}

function sessionEnded() {
  showMessage(
    'Your session has ended',
    'Your session has ended. Open the API settings again from your rental platform to start a new one.',
  );
}

function navigate(path, { replace: replacing = false } = {}) {
  if (replacing) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  render(true);
  noteInput();
}

async function render(focus) {
  const session = currentSession();
  if (!session) return;
  const turn = ++rendering;
  refresh = null;
  let path = location.pathname.replace(/\/+$/, '');
  if (path === '/portal' || path === '') {
    history.replaceState(null, '', '/portal/endpoints');
    path = '/portal/endpoints';
  }
  for (const link of document.querySelectorAll('#nav a')) {
    const here = path === link.pathname || path.startsWith(`${link.pathname}/`);
    if (here) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const route = ROUTES.find(([pattern]) => pattern.test(path));
  replace(main, h('p', { class: 'loading' }, 'Loading…'));
  const ctx = {
    main: h('div'),
    params: route ? { ...path.match(route[0]).groups } : {},
    search: new URLSearchParams(location.search),
    readOnly: session.readOnly || session.workspace.status === 'frozen',
    navigate,
    live: (fn) => {
      if (turn === rendering) refresh = fn;
    },
    heading: (title) => {
      document.title = `${title} · API settings`;
      return h('h1', { tabindex: '-1' }, title);
    },
  };
  try {
    if (route) await route[1](ctx);
    else
      replace(
        ctx.main,
        ctx.heading('Page not found'),
        h('p', {}, 'There is no such page. Choose one from the navigation.'),
      );
  } catch (err) {
    if (!currentSession()) return; // the session ended: its message is shown
    replace(
      ctx.main,
      ctx.heading(err.status === 404 ? 'Not found' : 'Something went wrong'),
      h('p', { role: 'alert' }, err.status === 404 ? `Not found: ${err.message}` : err.message),
    );
  }
  // Another page was asked for meanwhile, or the session ended or was signed out: its words stay.
  if (turn !== rendering || !currentSession()) return;
  failures = 0;
  retryAt = 0;
  if (!paused) showNotice(null);
  replace(main, ...ctx.main.childNodes);
  if (focus) main.querySelector('h1')?.focus();
}

/** A form being edited, a dialog open, or focus inside what a refresh would redraw: not now. */
function busy() {
  if (document.querySelector('dialog[open]')) return true;
  const active = document.activeElement;
  if (!active || active === document.body) return false;
  return Boolean(active.closest('form, [data-live]'));
}

/** Stops background refresh: says why, and when the session ends (or ended) without use. */
function pause(session) {
  paused = true;
  const idleMs = session.idleTimeoutMinutes * 60_000;
  const away = Math.floor((Date.now() - lastInput) / 60_000);
  const ends = new Date(Math.min(lastAnswered() + idleMs, Date.parse(session.expiresAt)));
  showNotice(
    ends.getTime() > Date.now()
      ? `This page stopped refreshing because it has not been used for ${away} minutes. Your session ends at ${formatTime(ends.toISOString())} unless you use the page: press a key or click anywhere to resume refreshing.`
      : `This page stopped refreshing because it has not been used for ${away} minutes, and your session has ended (${session.idleTimeoutMinutes} minutes without use). Press a key or click anywhere to check.`,
  );
}

/** A key, a click, focus into a form or a navigation: the person is here; a paused page refreshes again at once. */
function noteInput() {
  lastInput = Date.now();
  if (!paused) return;
  paused = false;
  showNotice(null);
  refreshNow();
}

async function refreshNow() {
  const session = currentSession();
  if (!refresh || !session || refreshing || document.visibilityState !== 'visible' || busy() || Date.now() < retryAt)
    return;
  if (Date.now() - lastInput >= session.idleTimeoutMinutes * 60_000 - IDLE_MARGIN_MS) {
    pause(session);
    return;
  }
  const turn = rendering;
  refreshing = true;
  try {
    await refresh({ background: true });
    failures = 0;
    retryAt = 0;
    if (!paused) showNotice(null);
  } catch (err) {
    // The session ended (its message is shown: a 401 ends it), or another page is shown by now.
    if (!currentSession() || turn !== rendering) return;
    // What the page shows is gone: drawn again, as not found.
    if (err.status === 404) {
      render(false);
      return;
    }
    failures++;
    const waitMs =
      err.retryAfter !== undefined ? err.retryAfter * 1000 : Math.min(REFRESH_MS * 2 ** failures, MAX_BACKOFF_MS);
    retryAt = Date.now() + waitMs;
    showNotice(`Couldn't refresh this page: ${inWords(err)} Trying again in ${Math.ceil(waitMs / 1000)} s.`);
  } finally {
    refreshing = false;
  }
}

/** Every 5 s while the page is visible (a hidden page asks nothing), and at once when it is shown again. */
async function tick() {
  await refreshNow();
  setTimeout(tick, REFRESH_MS);
}

function interceptLinks() {
  document.addEventListener('click', (event) => {
    if (
      event.defaultPrevented ||
      event.button !== 0 ||
      event.metaKey ||
      event.ctrlKey ||
      event.shiftKey ||
      event.altKey
    )
      return;
    const link = event.target.closest('a[href]');
    if (!link || link.origin !== location.origin || link.target) return;
    if (!link.pathname.startsWith('/portal/') || /^\/portal\/(api|assets)\//.test(link.pathname)) return;
    if (link.hash && link.pathname === location.pathname) return; // a place on this page
    event.preventDefault();
    navigate(link.pathname + link.search);
  });
  addEventListener('popstate', () => {
    render(true);
    noteInput();
  });
}

/** What counts as the person using the page (a background refresh does not). */
function watchInput() {
  addEventListener('pointerdown', noteInput, true);
  addEventListener('keydown', noteInput, true);
  document.addEventListener('focusin', (event) => {
    if (event.target instanceof Element && event.target.closest('form')) noteInput();
  });
}

function showSession(session) {
  setTimeZone(session.workspace.timezone);
  document.getElementById('nav').hidden = false;
  const problem = h('span', { class: 'field-error', role: 'alert', hidden: true });
  const signOut = h(
    'button',
    {
      type: 'button',
      class: 'link-button',
      onclick: async () => {
        problem.hidden = true;
        try {
          await endSession();
        } catch (err) {
          // Not confirmed: the session may still be open, so the page keeps it and says so.
          problem.textContent = `Not signed out: ${inWords(err)} Try again.`;
          problem.hidden = false;
          return;
        }
        showMessage(
          'Signed out',
          'You are signed out. Open the API settings again from your rental platform to come back.',
        );
      },
    },
    'Sign out',
  );
  replace(
    document.getElementById('who'),
    h('span', {}, `Workspace ${session.workspace.slug}`),
    session.readOnly ? h('span', { class: 'badge' }, 'Read only') : null,
    session.workspace.status === 'frozen'
      ? h('span', { class: 'badge' }, 'Frozen: its keys are refused, its webhooks held, nothing can be changed')
      : null,
    signOut,
    problem,
  );
}

/** Why a session could not be started, in words, and whether trying again with the same link can work. */
function notStarted(err) {
  if (!(err instanceof ApiError))
    return {
      title: 'The service cannot be reached',
      text: 'The service did not answer. Check the connection, then try again.',
      retry: true,
    };
  if (err.status === 400)
    return {
      title: 'This link is malformed',
      text: 'This link is incomplete or was changed. Open the API settings again from your rental platform.',
      retry: false,
    };
  if (err.status === 429) {
    return {
      title: 'Too many attempts',
      text: `There were too many attempts from this address: try again in ${err.retryAfter ?? 60} s.`,
      retry: true,
    };
  }
  if (err.status === 503) {
    return {
      title: 'Service unavailable',
      text: `The service is unavailable for now: try again${err.retryAfter !== undefined ? ` in ${err.retryAfter} s` : ' in a moment'}.`,
      retry: true,
    };
  }
  return { title: 'Something went wrong', text: `The session could not be started: ${err.message}`, retry: true };
}

/**
 * The browser holds a session of another workspace than the link's: another site may have sent it here with a link of
 * its own (to have the person work in the wrong workspace), so the page asks before replacing the session. The link's
 * key is not used up until the person chooses to open it.
 */
function askToReplace(key, { openWorkspace, linkWorkspace }) {
  showMessage(
    'Switch workspace?',
    `This browser has the API settings of workspace ${openWorkspace.slug} open. The link you followed is for workspace ${linkWorkspace.slug}. Opening it signs you out of ${openWorkspace.slug} here. If you did not mean to switch, stay.`,
    h(
      'p',
      { class: 'actions' },
      h('button', { type: 'button', onclick: () => start(key, { replace: true }) }, `Open ${linkWorkspace.slug}`),
      h('button', { type: 'button', onclick: () => start(undefined) }, `Stay in ${openWorkspace.slug}`),
    ),
  );
}

/**
 * Starts the session (with the link's key, kept only here once it left the address bar) and the screen. When the
 * service refuses for now (429, 503, no answer), "Try again" uses the same key: it was not used up.
 */
async function start(key, options = {}) {
  let result;
  try {
    result = await startSession(key, options);
  } catch (err) {
    const why = notStarted(err);
    showMessage(
      why.title,
      why.text,
      why.retry ? h('p', {}, h('button', { type: 'button', onclick: () => start(key, options) }, 'Try again')) : null,
    );
    return;
  }
  if (result.conflict) {
    askToReplace(key, result.conflict);
    return;
  }
  if (!result.session) {
    if (result.refused)
      showMessage('This link cannot be used', 'This link has already been used or has expired. Ask for a new one.');
    else
      showMessage(
        'You are signed out',
        'You are signed out. Open the API settings from your rental platform to sign in.',
      );
    return;
  }
  onSessionEnded(sessionEnded);
  showSession(result.session);
  interceptLinks();
  watchInput();
  lastInput = Date.now();
  await render(false);
  document.addEventListener('visibilitychange', refreshNow);
  setTimeout(tick, REFRESH_MS);
}

async function boot() {
  // The link's one-time key is in the fragment (never sent to a server by the browser): used once, then removed
  // from the address bar and the history entry.
  const fragment = new URLSearchParams(location.hash.slice(1));
  const key = fragment.get('key') ?? undefined;
  if (key) history.replaceState(null, '', location.pathname + location.search);
  await start(key);
}

boot();
