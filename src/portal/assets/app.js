// The settings screen: signs in with the link's one-time key, then routes by path under /portal/ (history API; the
// server answers index.html for every such path) and keeps the live pages fresh while they are visible.
import { currentSession, endSession, onSessionEnded, startSession } from './api.js';
import { h, replace, setTimeZone } from './dom.js';
import { keysPage } from './keys.js';
import { endpointPage, endpointsPage, newEndpointPage } from './endpoints.js';
import { deliveriesPage, deliveryPage } from './deliveries.js';
import { eventsPage } from './events.js';
import { settingsPage } from './settings.js';

/** How often the live pages (endpoints, deliveries) are refreshed while visible. */
const REFRESH_MS = 5000;

/**
 * @typedef {object} PageContext
 * @property {HTMLElement} main where the page renders
 * @property {Record<string, string>} params path parameters
 * @property {URLSearchParams} search the query string
 * @property {boolean} readOnly a read-only session, or a frozen workspace (whose sessions write nothing): no write is offered
 * @property {(path: string, options?: {replace?: boolean}) => void} navigate
 * @property {(refresh: () => Promise<void>) => void} live registers what the 5-second refresh calls
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
let refresh = null;
let rendering = 0;

/** Words instead of the screen: the link was refused, the session ended, or there is none. */
function showMessage(title, text) {
  refresh = null;
  document.getElementById('nav').hidden = true;
  replace(document.getElementById('who'));
  document.title = `${title} · API settings`;
  replace(main, h('h1', { tabindex: '-1' }, title), h('p', { class: 'message' }, text));
  main.querySelector('h1').focus();
}

function sessionEnded() {
  showMessage('Your session has ended', 'Your session has ended. Open the API settings again from your rental platform to start a new one.');
}

function navigate(path, { replace: replacing = false } = {}) {
  if (replacing) history.replaceState(null, '', path);
  else history.pushState(null, '', path);
  render(true);
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
    live: (fn) => { if (turn === rendering) refresh = fn; },
    heading: (title) => {
      document.title = `${title} · API settings`;
      return h('h1', { tabindex: '-1' }, title);
    },
  };
  try {
    if (route) await route[1](ctx);
    else replace(ctx.main, ctx.heading('Page not found'), h('p', {}, 'There is no such page. Choose one from the navigation.'));
  } catch (err) {
    if (!currentSession()) return; // the session ended: its message is shown
    replace(ctx.main, ctx.heading(err.status === 404 ? 'Not found' : 'Something went wrong'),
      h('p', { role: 'alert' }, err.status === 404 ? `Not found: ${err.message}` : err.message));
  }
  if (turn !== rendering) return;
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

async function refreshNow() {
  if (!refresh || document.visibilityState !== 'visible' || busy()) return;
  try {
    await refresh();
  } catch {
    // the next tick tries again; a 401 has ended the session already
  }
}

/** Every 5 s while the page is visible (a hidden page asks nothing), and at once when it is shown again. */
async function tick() {
  await refreshNow();
  setTimeout(tick, REFRESH_MS);
}

function interceptLinks() {
  document.addEventListener('click', (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const link = event.target.closest('a[href]');
    if (!link || link.origin !== location.origin || link.target) return;
    if (!link.pathname.startsWith('/portal/') || /^\/portal\/(api|assets)\//.test(link.pathname)) return;
    if (link.hash && link.pathname === location.pathname) return; // a place on this page
    event.preventDefault();
    navigate(link.pathname + link.search);
  });
  addEventListener('popstate', () => render(true));
}

function showSession(session) {
  setTimeZone(session.workspace.timezone);
  document.getElementById('nav').hidden = false;
  const signOut = h('button', {
    type: 'button',
    class: 'link-button',
    onclick: async () => {
      try {
        await endSession();
      } finally {
        showMessage('Signed out', 'You are signed out. Open the API settings again from your rental platform to come back.');
      }
    },
  }, 'Sign out');
  replace(document.getElementById('who'),
    h('span', {}, `Workspace ${session.workspace.slug}`),
    session.readOnly ? h('span', { class: 'badge' }, 'Read only') : null,
    session.workspace.status === 'frozen' ? h('span', { class: 'badge' }, 'Frozen: its keys are refused, its webhooks held, nothing can be changed') : null,
    signOut);
}

async function boot() {
  // The link's one-time key is in the fragment (never sent to a server by the browser): used once, then removed
  // from the address bar and the history entry.
  const fragment = new URLSearchParams(location.hash.slice(1));
  const key = fragment.get('key') ?? undefined;
  if (key) history.replaceState(null, '', location.pathname + location.search);
  let result;
  try {
    result = await startSession(key);
  } catch (err) {
    showMessage('The service cannot be reached', err.message);
    return;
  }
  if (!result.session) {
    if (result.refused) showMessage('This link cannot be used', 'This link has already been used or has expired. Ask for a new one.');
    else showMessage('You are signed out', 'You are signed out. Open the API settings from your rental platform to sign in.');
    return;
  }
  onSessionEnded(sessionEnded);
  showSession(result.session);
  interceptLinks();
  await render(false);
  document.addEventListener('visibilitychange', refreshNow);
  setTimeout(tick, REFRESH_MS);
}

boot();
