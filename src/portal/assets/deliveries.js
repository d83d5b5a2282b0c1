// Deliveries: the workspace's log (filters, paging by nextCursor), and one delivery with its payload as sent and
// every attempt, with "Retry now".
import { admin, eventTypes, query } from './api.js';
import {
  clearErrors,
  details,
  field,
  focusOn,
  formatTime,
  h,
  isInstant,
  isoToZoned,
  jsonBlock,
  newest,
  replace,
  showError,
  statusLine,
  table,
  time,
  timeZone,
  zonedToIso,
} from './dom.js';

const STATUSES = ['queued', 'retrying', 'accepted', 'failed', 'held'];
const FILTERS = ['endpointId', 'status', 'event', 'since', 'until'];

/** "204", "HTTP 500 (status)", "timeout"...: how the last attempt went, in words. */
function lastResult(row) {
  if (row.attempts === 0) return 'not attempted yet';
  const parts = [];
  if (row.lastStatusCode !== null) parts.push(String(row.lastStatusCode));
  if (row.lastErrorKind) parts.push(row.lastErrorKind);
  return parts.join(' · ') || '—';
}

const statusBadge = (status) => h('span', { class: `state ${status}` }, status);

/** @param {import('./app.js').PageContext} ctx */
export async function deliveriesPage(ctx) {
  const filters = Object.fromEntries(FILTERS.map((name) => [name, ctx.search.get(name) ?? '']));
  // A time in the address that is no time (an edited link) is left out of the request, and the form says so.
  const unreadable = ['since', 'until'].filter((name) => filters[name] && !isInstant(filters[name]));
  for (const name of unreadable) filters[name] = '';
  const [{ rows: endpoints }, types] = await Promise.all([admin('GET', '/endpoints'), eventTypes()]);
  const names = new Map(endpoints.map((e) => [e.id, e.name]));

  const option = (value, label, selected) => h('option', { value, selected: value === selected }, label);
  const endpoint = h(
    'select',
    { name: 'endpointId' },
    option('', 'Every endpoint', filters.endpointId),
    endpoints.map((e) => option(e.id, e.name, filters.endpointId)),
  );
  const status = h(
    'select',
    { name: 'status' },
    option('', 'Any status', filters.status),
    STATUSES.map((s) => option(s, s, filters.status)),
  );
  const event = h(
    'select',
    { name: 'event' },
    option('', 'Any event', filters.event),
    types.map((t) => option(t.event, t.event, filters.event)),
  );
  const since = h('input', { type: 'datetime-local', name: 'since', value: isoToZoned(filters.since) });
  const until = h('input', { type: 'datetime-local', name: 'until', value: isoToZoned(filters.until) });
  const form = h(
    'form',
    { class: 'card filters', role: 'search', 'aria-label': 'Filter deliveries' },
    h(
      'div',
      { class: 'grid' },
      field('Endpoint', endpoint),
      field('Status', status),
      field('Event', event),
      field('Created since', since),
      field('Created before', until),
    ),
    h('p', { class: 'hint' }, `Times are in ${timeZone()} time.`),
    h(
      'div',
      { class: 'actions' },
      h('button', { type: 'submit', class: 'primary' }, 'Apply filters'),
      h('a', { href: '/portal/deliveries', class: 'button' }, 'Clear filters'),
    ),
  );
  for (const name of unreadable) {
    showError(
      form,
      { reason: name, message: `The address's time "${ctx.search.get(name)}" is not a time: it is ignored.` },
      { focus: false },
    );
  }
  form.addEventListener('submit', (submitted) => {
    submitted.preventDefault();
    clearErrors(form);
    const chosen = {
      endpointId: endpoint.value,
      status: status.value,
      event: event.value,
      since: zonedToIso(since.value),
      until: zonedToIso(until.value),
    };
    ctx.navigate(`/portal/deliveries${query(chosen)}`);
  });

  // Paging: the cursors of the pages before this one (a cursor only goes on; "Previous page" goes back by the stack).
  const cursors = [];
  let cursor;
  const list = h('div', { 'data-live': '' });
  const paging = h('div', { class: 'actions paging' });
  const load = newest(async (isNewest, { background = false } = {}) => {
    let page;
    try {
      page = await admin('GET', `/deliveries${query({ ...filters, cursor, limit: 50 })}`);
    } catch (err) {
      if (err.status !== 400) throw err;
      if (!isNewest()) return;
      replace(list);
      replace(paging);
      showError(form, err, { focus: !background });
      return;
    }
    if (!isNewest()) return;
    replace(
      list,
      table(
        'Deliveries, newest first',
        ['Created', 'Event', 'Endpoint', 'Status', 'Attempts', 'Last result'],
        page.rows.map((row) => [
          time(row.createdAt),
          h(
            'a',
            {
              href: `/portal/deliveries/${encodeURIComponent(row.id)}`,
              'aria-label': `${row.event}, ${formatTime(row.createdAt)}`,
            },
            row.event,
          ),
          h(
            'a',
            { href: `/portal/endpoints/${encodeURIComponent(row.endpointId)}` },
            names.get(row.endpointId) ?? 'a deleted endpoint',
          ),
          statusBadge(row.status),
          String(row.attempts),
          lastResult(row),
        ]),
        'No delivery matches these filters.',
      ),
    );
    replace(
      paging,
      cursors.length ? h('button', { type: 'button', onclick: () => turnPage(cursors.pop()) }, 'Previous page') : null,
      page.nextCursor
        ? h(
            'button',
            {
              type: 'button',
              onclick: () => {
                cursors.push(cursor);
                turnPage(page.nextCursor);
              },
            },
            'Next page',
          )
        : null,
    );
  });
  /** The paging buttons are redrawn with the page: focus goes to the new page's table (its caption names it). */
  const turnPage = async (to) => {
    cursor = to;
    await load();
    focusOn(list.querySelector('caption'));
  };
  await load();
  ctx.live(load);
  replace(
    ctx.main,
    ctx.heading('Deliveries'),
    h(
      'p',
      {},
      "Every delivery of this workspace's events to its endpoints, newest first. The list refreshes by itself.",
    ),
    form,
    list,
    paging,
  );
}

/** @param {import('./app.js').PageContext} ctx */
export async function deliveryPage(ctx) {
  const id = ctx.params.id;
  let delivery;
  try {
    delivery = await admin('GET', `/deliveries/${encodeURIComponent(id)}`);
  } catch (err) {
    if (err.status !== 404 && err.status !== 400) throw err;
    replace(
      ctx.main,
      ctx.heading('Delivery not found'),
      h('p', { role: 'alert' }, 'This delivery was not found in this workspace.'),
      h('p', {}, h('a', { href: '/portal/deliveries' }, 'Back to the deliveries')),
    );
    return;
  }
  const announce = statusLine();
  const body = h('div', { 'data-live': '' });
  const show = () => {
    replace(
      body,
      details([
        ['Event', h('code', {}, delivery.event)],
        [
          'Endpoint',
          h('a', { href: `/portal/endpoints/${encodeURIComponent(delivery.endpointId)}` }, 'Open the endpoint'),
        ],
        ['Status', statusBadge(delivery.status)],
        ['Attempts', String(delivery.attemptCount)],
        ['Created', time(delivery.createdAt)],
        ['Last attempt', time(delivery.lastAttemptAt, 'none yet')],
        ['Next attempt', time(delivery.nextAttemptAt, 'none scheduled')],
        ['Delivery id', h('code', {}, delivery.id)],
      ]),
      ctx.readOnly || delivery.status === 'held' ? null : h('div', { class: 'actions' }, retry),
      delivery.status === 'held'
        ? h('p', {}, 'Held: its endpoint is switched off. Switching it back on sends it.')
        : null,
      h('h2', {}, 'Payload as sent'),
      jsonBlock(delivery.payload, 'Payload'),
      h('h2', {}, 'Attempts'),
      table(
        'Every attempt, oldest first',
        ['#', 'Started', 'Duration', 'Status', 'Error kind', 'Error', "Receiver's answer"],
        delivery.attempts.map((a) => [
          String(a.number),
          time(a.startedAt),
          `${a.durationMs} ms`,
          a.statusCode === null ? 'no answer' : String(a.statusCode),
          a.errorKind ?? '—',
          a.error ?? '—',
          a.responseBody === null
            ? h('span', { class: 'muted' }, 'no answer')
            : a.responseBody === ''
              ? h('span', { class: 'muted' }, '(empty)')
              : h('pre', { class: 'excerpt' }, a.responseBody),
        ]),
        'Not attempted yet.',
      ),
    );
  };
  const reload = newest(async (isNewest) => {
    const fresh = await admin('GET', `/deliveries/${encodeURIComponent(id)}`);
    if (!isNewest()) return;
    delivery = fresh;
    show();
  });
  const retry = h(
    'button',
    {
      type: 'button',
      class: 'primary',
      onclick: async () => {
        try {
          const retried = await admin('POST', `/deliveries/${encodeURIComponent(id)}/retry`);
          announce.textContent = `The delivery is due now (it was ${retried.previousStatus}).`;
        } catch (err) {
          announce.textContent = err.message;
        }
        await reload().catch(() => {});
        focusOn(announce);
      },
    },
    'Retry now',
  );
  show();
  ctx.live(reload);
  replace(ctx.main, ctx.heading(`Delivery of ${delivery.event}`), announce, body);
}
