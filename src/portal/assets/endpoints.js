// Webhook endpoints: the list (status, failures in a row, last success), adding one (its secret shown once), and one
// endpoint's page: its chart, test and example deliveries, switching back on, editing, rotating the secret,
// recovering failed deliveries and deletion.
import { admin, eventTypes, grouped } from './api.js';
import { attemptsChart } from './chart.js';
import {
  clearErrors,
  confirmDialog,
  details,
  field,
  focusOn,
  formatTime,
  h,
  newest,
  replace,
  shownOnce,
  showError,
  statusLine,
  table,
  time,
  timeZone,
  uid,
  zonedToIso,
} from './dom.js';
import { inlineMarkdown } from './markdown.js';

const path = (id, rest = '') => `/endpoints/${encodeURIComponent(id)}${rest}`;

/** Why an endpoint is off, as the screen says it (Endpoint.disabledReason). */
const DISABLED_BECAUSE = {
  failures: 'after 20 failed attempts in a row',
  gone: 'the receiver answered 410 Gone',
  manual: 'by hand',
};

/**
 * "Active" (", throttled until <time>" while its receiver's 429/502/503/504 holds it: Endpoint.throttledUntil), or
 * "Switched off <time>, <why>" (Endpoint.isActive, Endpoint.disabledAt, Endpoint.disabledReason).
 */
export function endpointStatus(endpoint) {
  if (endpoint.isActive && endpoint.throttledUntil && Date.parse(endpoint.throttledUntil) > Date.now())
    return h('span', { class: 'state ok' }, 'Active, throttled until ', time(endpoint.throttledUntil, ''));
  if (endpoint.isActive) return h('span', { class: 'state ok' }, 'Active');
  const why = DISABLED_BECAUSE[endpoint.disabledReason];
  return h('span', { class: 'state off' }, 'Switched off ', time(endpoint.disabledAt, ''), why ? `, ${why}` : '');
}

/** The events to subscribe to, grouped as the catalogue groups them (webhook.test is sent on request, never subscribed). */
function eventsField(types, selected = []) {
  const id = uid('events');
  const error = h('p', { class: 'field-error', id: `${id}-error`, hidden: true });
  const hint = h(
    'p',
    { class: 'hint', id: `${id}-hint` },
    'Choose none to receive every event, including those added later.',
  );
  const groups = grouped(types.filter((t) => t.event !== 'webhook.test')).map(([group, events]) =>
    h(
      'fieldset',
      { class: 'group' },
      h('legend', {}, group),
      events.map((type) => {
        const box = h('input', {
          type: 'checkbox',
          name: 'events',
          value: type.event,
          id: uid('event'),
          checked: selected.includes(type.event),
        });
        return h(
          'div',
          { class: 'check' },
          box,
          h(
            'label',
            { for: box.id },
            h('code', {}, type.event),
            h('span', { class: 'muted' }, ' ', inlineMarkdown(type.summary)),
          ),
        );
      }),
    ),
  );
  return h(
    'div',
    { class: 'field', 'data-field': 'events' },
    h(
      'fieldset',
      { id, 'aria-describedby': `${hint.id} ${error.id}` },
      h('legend', {}, 'Events'),
      hint,
      h('div', { class: 'groups' }, groups),
      error,
    ),
  );
}

/** The throttle's field (Endpoint.rateLimit): empty for none. */
function rateLimitField(current = null) {
  const input = h('input', {
    type: 'number',
    name: 'rateLimit',
    min: '1',
    max: '1000',
    step: '1',
    inputmode: 'numeric',
    value: current === null ? '' : String(current),
  });
  return {
    input,
    element: field(
      'Rate limit (deliveries a second)',
      input,
      'At most this many deliveries a second, 1 to 1000, for a receiver that cannot take more; empty for no limit.',
    ),
  };
}

/** The field's value as the API takes it (null: no limit), or undefined after naming the problem next to it. */
function chosenRateLimit(form, input) {
  // (a number field holds '' for text that is no number: that is refused, not taken as "no limit")
  if (input.value.trim() === '' && !input.validity.badInput) return null;
  const n = Number(input.value);
  if (Number.isInteger(n) && n >= 1 && n <= 1000) return n;
  showError(form, {
    reason: 'rateLimit',
    message: 'Enter a whole number from 1 to 1000, or leave it empty for no limit.',
  });
  return undefined;
}

/** "at most 10 a second", or "no limit" (Endpoint.rateLimit). */
const describeRateLimit = (endpoint) =>
  endpoint.rateLimit === null ? 'no limit' : `at most ${endpoint.rateLimit} a second`;

const chosenEvents = (form) => [...form.querySelectorAll('input[name="events"]:checked')].map((box) => box.value);

/** @param {import('./app.js').PageContext} ctx */
export async function endpointsPage(ctx) {
  const list = h('div', { 'data-live': '' });
  const load = newest(async (isNewest) => {
    const { rows } = await admin('GET', '/endpoints');
    if (!isNewest()) return;
    replace(
      list,
      table(
        'Webhook endpoints of this workspace, oldest first',
        ['Name', 'URL', 'Status', 'Failures in a row', 'Last success'],
        rows.map((endpoint) => [
          h('a', { href: `/portal/endpoints/${encodeURIComponent(endpoint.id)}` }, endpoint.name),
          h('span', { class: 'url' }, endpoint.url),
          endpointStatus(endpoint),
          String(endpoint.consecutiveFailures),
          time(endpoint.lastSuccessAt, 'never'),
        ]),
        'This workspace has no webhook endpoints yet.',
      ),
    );
  });
  await load();
  ctx.live(load);
  replace(
    ctx.main,
    ctx.heading('Webhook endpoints'),
    h(
      'p',
      {},
      "Where this workspace's events are sent. An endpoint that fails 20 times in a row is switched off until it is switched back on.",
    ),
    ctx.readOnly
      ? null
      : h('p', {}, h('a', { href: '/portal/endpoints/new', class: 'button primary' }, 'Add endpoint')),
    list,
  );
}

/** @param {import('./app.js').PageContext} ctx */
export async function newEndpointPage(ctx) {
  if (ctx.readOnly) {
    replace(
      ctx.main,
      ctx.heading('Add an endpoint'),
      h('p', {}, 'This session is read only: endpoints cannot be added.'),
    );
    return;
  }
  const types = await eventTypes();
  const url = h('input', {
    type: 'url',
    name: 'url',
    required: true,
    maxlength: '2048',
    autocomplete: 'off',
    placeholder: 'https://',
  });
  const name = h('input', { type: 'text', name: 'name', maxlength: '200', autocomplete: 'off' });
  const scheme = schemeSelect('hmac-sha256');
  const rateLimit = rateLimitField();
  const shown = h('div');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    field('URL', url, 'Where deliveries are POSTed: an https address your receiver answers on.'),
    field('Name (optional)', name, "Shown in this screen; the URL's host when left empty."),
    eventsField(types),
    field('Signature scheme', scheme, SCHEME_HINT),
    rateLimit.element,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Add endpoint')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(form);
    const body = { url: url.value.trim(), events: chosenEvents(form) };
    if (name.value.trim()) body.name = name.value.trim();
    if (scheme.value !== 'hmac-sha256') body.signatureScheme = scheme.value;
    const limit = chosenRateLimit(form, rateLimit.input);
    if (limit === undefined) return;
    if (limit !== null) body.rateLimit = limit;
    try {
      const created = await admin('POST', '/endpoints', body);
      form.hidden = true;
      const open = h('a', { href: `/portal/endpoints/${encodeURIComponent(created.id)}` }, 'Open the endpoint');
      // an ed25519 endpoint is handed no secret: its public key is all the receiver needs
      replace(
        shown,
        h('p', { role: 'status' }, `Endpoint "${created.name}" added.`),
        created.secret !== null
          ? shownOnce(
              'Signing secret',
              created.secret,
              h('p', {}, 'Your receiver verifies every delivery with it. ', open),
            )
          : [publicKeyLine(created.publicKey), h('p', {}, 'No signing secret is handed out. ', open)],
      );
      (shown.querySelector('input') ?? shown.querySelector('a')).focus();
    } catch (err) {
      showError(form, err);
    }
  });
  replace(ctx.main, ctx.heading('Add an endpoint'), shown, form);
}

/** @param {import('./app.js').PageContext} ctx */
export async function endpointPage(ctx) {
  const id = ctx.params.id;
  let endpoint;
  try {
    endpoint = await admin('GET', path(id));
  } catch (err) {
    if (err.status !== 404 && err.status !== 400) throw err;
    replace(
      ctx.main,
      ctx.heading('Endpoint not found'),
      h(
        'p',
        { role: 'alert' },
        'This endpoint was not found in this workspace: it may have been deleted, or the address is wrong.',
      ),
      h('p', {}, h('a', { href: '/portal/endpoints' }, 'Back to the endpoints')),
    );
    return;
  }
  const types = await eventTypes();
  const announce = statusLine();
  const summary = h('div', { 'data-live': '' });
  const actions = h('div', { class: 'actions' });
  const chart = attemptsChart(id);

  const show = () => {
    replace(
      summary,
      details([
        ['URL', h('span', { class: 'url' }, endpoint.url)],
        ['Status', endpointStatus(endpoint)],
        ['Failures in a row', String(endpoint.consecutiveFailures)],
        ['Last success', time(endpoint.lastSuccessAt, 'never')],
        ['Events', endpoint.events.length ? endpoint.events.join(', ') : 'every event'],
        ['Signature scheme', schemeText(endpoint)],
        ...(endpoint.publicKey ? [['Public key', h('code', { class: 'public-key' }, endpoint.publicKey)]] : []),
        ['Rate limit', describeRateLimit(endpoint)],
      ]),
    );
    if (!ctx.readOnly) replace(actions, endpoint.isActive ? switchOff : switchOn, sendTest);
  };
  const reload = newest(async (isNewest) => {
    const fresh = await admin('GET', path(id));
    if (!isNewest()) return;
    endpoint = fresh;
    show();
    await chart.refresh();
  });
  /**
   * Runs a write; its outcome in words in the status line, then the page's figures again. The redraw replaces the
   * buttons (focus would fall to <body>): the status line takes focus.
   */
  const act = async (work) => {
    try {
      announce.textContent = await work();
    } catch (err) {
      announce.textContent = err.message;
    }
    await reload().catch(() => {});
    focusOn(announce);
  };

  const switchOn = h(
    'button',
    {
      type: 'button',
      class: 'primary',
      onclick: () =>
        act(async () => {
          await admin('POST', path(id, '/enable'));
          return 'The endpoint is switched back on; what it held is being sent.';
        }),
    },
    'Switch back on',
  );
  const switchOff = h(
    'button',
    {
      type: 'button',
      onclick: async () => {
        if (
          !(await confirmDialog({
            title: 'Switch this endpoint off?',
            body: 'Its deliveries are held until it is switched back on.',
            confirm: 'Switch off',
          }))
        )
          return;
        await act(async () => {
          await admin('POST', path(id, '/disable'));
          return 'The endpoint is switched off; its deliveries are held.';
        });
      },
    },
    'Switch off',
  );
  const sendTest = h(
    'button',
    {
      type: 'button',
      onclick: () =>
        act(async () => {
          const sent = await admin('POST', '/example-events', { endpointId: id, event: 'webhook.test' });
          return `A test delivery is queued (delivery ${sent.deliveryId}).`;
        }),
    },
    'Send test delivery',
  );

  const sections = [];
  if (!ctx.readOnly) {
    sections.push(
      exampleForm(id, types, act),
      editForm(endpoint, types, (updated) => {
        endpoint = updated;
        show();
      }),
      // (an ed25519 endpoint's secret signs nothing: its key pair is rotated in the signature form instead)
      ...(endpoint.signatureScheme === 'ed25519' ? [] : [rotateForm(id)]),
      signatureForm(id, () => endpoint, act),
      recoverForm(id),
      deleteSection(() => endpoint, ctx),
    );
  }
  show();
  await chart.refresh();
  ctx.live(reload);
  replace(
    ctx.main,
    ctx.heading(endpoint.name),
    announce,
    summary,
    actions,
    h(
      'p',
      {},
      h('a', { href: `/portal/deliveries?endpointId=${encodeURIComponent(id)}` }, 'Deliveries to this endpoint'),
    ),
    chart.element,
    sections,
  );
}

function exampleForm(id, types, act) {
  const event = h(
    'select',
    { name: 'event' },
    types.filter((t) => t.event !== 'webhook.test').map((t) => h('option', { value: t.event }, t.event)),
  );
  const form = h(
    'form',
    { class: 'card' },
    h('h2', {}, 'Send an example event'),
    h('p', {}, "Sends the catalogue's example of an event to this endpoint only, signed like any delivery."),
    field('Event', event),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Send example')),
  );
  form.addEventListener('submit', (submitted) => {
    submitted.preventDefault();
    act(async () => {
      const sent = await admin('POST', '/example-events', { endpointId: id, event: event.value });
      return `An example of ${sent.event} is queued (delivery ${sent.deliveryId}).`;
    });
  });
  return form;
}

function editForm(endpoint, types, updated) {
  const url = h('input', {
    type: 'url',
    name: 'url',
    required: true,
    maxlength: '2048',
    value: endpoint.url,
    autocomplete: 'off',
  });
  const name = h('input', {
    type: 'text',
    name: 'name',
    required: true,
    maxlength: '200',
    value: endpoint.name,
    autocomplete: 'off',
  });
  const rateLimit = rateLimitField(endpoint.rateLimit);
  const done = statusLine();
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('h2', {}, 'Edit the endpoint'),
    field('URL', url),
    field('Name', name),
    eventsField(types, endpoint.events),
    rateLimit.element,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save changes')),
    done,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(form);
    done.textContent = '';
    const body = {};
    if (url.value.trim() !== endpoint.url) body.url = url.value.trim();
    if (name.value.trim() !== endpoint.name) body.name = name.value.trim();
    const events = chosenEvents(form);
    if (events.length !== endpoint.events.length || events.some((e) => !endpoint.events.includes(e)))
      body.events = events;
    const limit = chosenRateLimit(form, rateLimit.input);
    if (limit === undefined) return;
    if (limit !== endpoint.rateLimit) body.rateLimit = limit;
    if (Object.keys(body).length === 0) {
      done.textContent = 'Nothing to save: nothing was changed.';
      return;
    }
    try {
      endpoint = await admin('PATCH', `/endpoints/${encodeURIComponent(endpoint.id)}`, body);
      updated(endpoint);
      done.textContent = 'Changes saved.';
    } catch (err) {
      showError(form, err);
    }
  });
  return form;
}

/** The overlap of a rotation or a scheme switch, in hours (0 to 720, 24 by default: SecretRotation.overlapHours). */
function overlapInput() {
  return h('input', {
    type: 'number',
    name: 'overlapHours',
    min: '0',
    max: '720',
    step: '1',
    value: '24',
    inputmode: 'numeric',
  });
}

/** The overlap entered, or undefined after showing the form's error when it is not a whole number from 0 to 720. */
function overlapHours(form, input) {
  const value = Number(input.value);
  if (input.value !== '' && Number.isInteger(value) && value >= 0 && value <= 720) return value;
  showError(form, { reason: 'overlapHours', message: 'Enter a whole number of hours from 0 to 720.' });
  return undefined;
}

function rotateForm(id) {
  const overlap = overlapInput();
  const shown = h('div');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('h2', {}, 'Rotate the signing secret'),
    h(
      'p',
      {},
      "The endpoint gets a new secret. During the overlap every delivery carries two signatures, the new secret's and the old one's, so the receiver can switch over without missing one.",
    ),
    field('Secret overlap (hours)', overlap, 'From 0 to 720 hours; 0 ends the old secret at once.'),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Rotate secret')),
    shown,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(form);
    const hours = overlapHours(form, overlap);
    if (hours === undefined) return;
    if (
      !(await confirmDialog({
        title: 'Rotate the signing secret?',
        body: `The old secret keeps signing for ${hours} hours.`,
        confirm: 'Rotate',
      }))
    )
      return;
    try {
      const rotated = await admin('POST', path(id, '/rotate-secret'), { overlapHours: hours });
      replace(
        shown,
        shownOnce(
          'New signing secret',
          rotated.secret,
          h(
            'p',
            {},
            rotated.previousSecretExpiresAt
              ? ['The previous secret also signs until ', time(rotated.previousSecretExpiresAt), '.']
              : 'The previous secret no longer signs.',
          ),
        ),
      );
      shown.querySelector('input').focus();
    } catch (err) {
      showError(form, err);
    }
  });
  return form;
}

// How an endpoint signs (issue 34 point 3): Standard Webhooks' `v1` with the secret (hmac-sha256) or `v1a` with a key
// pair of its own (ed25519), whose public key is not a secret and is shown whenever the page is.
const SCHEME_HINT =
  'hmac-sha256: signed with the signing secret (v1, and service-signature). ed25519: signed with a key pair of the endpoint (v1a); your receiver verifies with its public key and holds no secret.';

function schemeSelect(current) {
  return h(
    'select',
    { name: 'signatureScheme' },
    ['hmac-sha256', 'ed25519'].map((value) => h('option', { value, selected: value === current }, value)),
  );
}

/** The scheme, and until when the previous one still signs beside it (Endpoint.previousSchemeExpiresAt). */
function schemeText(endpoint) {
  const until = endpoint.previousSchemeExpiresAt;
  return until && new Date(until).getTime() > Date.now()
    ? [endpoint.signatureScheme, ' (the previous scheme also signs until ', time(until), ')']
    : endpoint.signatureScheme;
}

function publicKeyLine(publicKey) {
  return h(
    'p',
    {},
    'Signed with ed25519 (v1a): your receiver verifies with this public key (not a secret; shown on the endpoint page): ',
    h('code', { class: 'public-key' }, publicKey),
  );
}

/** Switching the scheme (with its overlap), and rotating an ed25519 endpoint's key pair. */
function signatureForm(id, current, act) {
  const scheme = schemeSelect(current().signatureScheme);
  const overlap = overlapInput();
  const rotateKey = h('button', { type: 'button' }, 'Rotate key pair');
  const shown = h('div');
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('h2', {}, 'Signature scheme'),
    h(
      'p',
      {},
      'Switching keeps the old scheme signing beside the new one during the overlap, so the receiver can move over without missing a delivery; after it an ed25519 endpoint gets v1a signatures only. Rotating the key pair works the same way: both keys sign during the overlap.',
    ),
    field('Scheme', scheme, SCHEME_HINT),
    field('Scheme overlap (hours)', overlap, 'From 0 to 720 hours; 0 ends the old scheme or key pair at once.'),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Switch scheme'), rotateKey),
    shown,
  );
  const hours = () => overlapHours(form, overlap);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(form);
    const overlapHours = hours();
    if (overlapHours === undefined) return;
    replace(shown);
    await act(async () => {
      const switched = await admin('POST', path(id, '/signature-scheme'), { scheme: scheme.value, overlapHours });
      // switched to hmac-sha256: a fresh secret, shown this once (as a rotation's)
      if (switched.secret !== null) replace(shown, shownOnce('New signing secret', switched.secret));
      return switched.publicKey
        ? `Signed with ed25519; public key ${switched.publicKey}.`
        : switched.secret !== null
          ? `Signed with ${switched.signatureScheme}, with a new signing secret, shown below this once.`
          : `Signed with ${switched.signatureScheme}.`;
    });
  });
  rotateKey.addEventListener('click', async () => {
    clearErrors(form);
    const overlapHours = hours();
    if (overlapHours === undefined) return;
    await act(async () => {
      const rotated = await admin('POST', path(id, '/rotate-signing-key'), { overlapHours });
      return `New public key ${rotated.publicKey}.`;
    });
  });
  return form;
}

function recoverForm(id) {
  const since = h('input', { type: 'datetime-local', name: 'since', required: true });
  const done = statusLine();
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    h('h2', {}, 'Recover failed deliveries'),
    h('p', {}, 'After the receiver is fixed: sends again every failed delivery to this endpoint created since a time.'),
    field('Since', since, `In ${timeZone()} time.`),
    h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Recover failed deliveries')),
    done,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(form);
    done.textContent = '';
    if (!since.value) {
      showError(form, { reason: 'since', message: 'Choose the time from which failed deliveries are sent again.' });
      return;
    }
    const sure = await confirmDialog({
      title: 'Recover failed deliveries?',
      body: `Every failed delivery to this endpoint created since ${formatTime(zonedToIso(since.value))} is sent again.`,
      confirm: 'Recover',
    });
    if (!sure) return;
    try {
      const recovered = await admin('POST', path(id, '/recover'), { since: zonedToIso(since.value) });
      done.textContent =
        recovered.queued === 1
          ? '1 failed delivery is queued again.'
          : `${recovered.queued} failed deliveries are queued again.`;
    } catch (err) {
      showError(form, err);
    }
  });
  return form;
}

/** @param {() => object} current the endpoint as it is now (its name may have been edited) */
function deleteSection(current, ctx) {
  const problem = statusLine();
  return h(
    'section',
    { class: 'card danger-zone', 'aria-label': 'Delete the endpoint' },
    h('h2', {}, 'Delete the endpoint'),
    h('p', {}, 'Nothing is sent to it again, and its pending deliveries are marked failed.'),
    h(
      'button',
      {
        type: 'button',
        class: 'danger',
        onclick: async () => {
          const endpoint = current();
          const sure = await confirmDialog({
            title: `Delete "${endpoint.name}"?`,
            body: 'Nothing is sent to it again. This cannot be undone.',
            confirm: 'Delete',
            danger: true,
          });
          if (!sure) return;
          try {
            await admin('DELETE', path(endpoint.id));
            ctx.navigate('/portal/endpoints');
          } catch (err) {
            problem.textContent = err.message;
          }
        },
      },
      'Delete endpoint',
    ),
    problem,
  );
}
