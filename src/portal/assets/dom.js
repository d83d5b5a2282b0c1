// DOM helpers of the settings screen. Every node is built with createElement and every string goes in as a text
// node, so what a user or the API supplied is never parsed as markup (the page never uses innerHTML with data).

/**
 * An element: `h('a', { href: '/x', class: 'link', onclick: fn }, 'text', child)`.
 * Props: `class`, `for`, `on<event>` (a listener), `hidden`/`disabled`/... (booleans), anything else an attribute.
 * Never a `style` attribute: the page's Content-Security-Policy refuses it (set `el.style.x` through the CSSOM).
 * @param {string} tag
 * @param {Record<string, unknown>} [props]
 * @param {...(Node|string|number|null|undefined|false|Array<any>)} children
 * @returns {HTMLElement}
 */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  setProps(el, props);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element, with attributes and children as `h` takes them. */
export function svg(tag, props = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setProps(el, props);
  append(el, children);
  return el;
}

function setProps(el, props) {
  for (const [name, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'style') throw new Error('no style attribute under the Content-Security-Policy');
    if (name.startsWith('on') && typeof value === 'function') el.addEventListener(name.slice(2), value);
    else if (name === 'class') el.setAttribute('class', String(value));
    else if (name === 'for') el.setAttribute('for', String(value));
    else if (name === 'value' && 'value' in el) el.value = String(value);
    else if (name === 'checked' || name === 'selected') el[name] = Boolean(value);
    else el.setAttribute(name, value === true ? '' : String(value));
  }
}

/** Appends children: nodes, strings (as text), arrays of them; null, undefined and false are skipped. */
export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** Replaces an element's children. */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

let ids = 0;
/** A unique element id with a readable prefix. */
export const uid = (prefix) => `${prefix}-${++ids}`;

// --- Times: shown in the workspace's time zone, the zone named.

let zone = 'UTC';
/** Sets the time zone every time on the page is shown in (the workspace's). */
export function setTimeZone(timezone) {
  zone = timezone;
}
export const timeZone = () => zone;

/** An instant as a <time> element in the workspace's zone, e.g. "25 Nov 2026, 23:35:41 GST"; "never" for null. */
export function time(iso, never = '—') {
  if (!iso) return h('span', {}, never);
  return h('time', { datetime: iso }, formatTime(iso));
}

/** An instant as text in the workspace's zone, with the zone's short name. */
export function formatTime(iso) {
  return new Intl.DateTimeFormat('en-GB', {
    timeZone: zone,
    year: 'numeric',
    month: 'short',
    day: 'numeric',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
    timeZoneName: 'short',
  }).format(new Date(iso));
}

/** The wall-clock parts of an instant in a zone. */
function wallClock(date, timezone) {
  const parts = Object.fromEntries(
    new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    })
      .formatToParts(date)
      .map((p) => [p.type, p.value]),
  );
  return Date.UTC(+parts.year, +parts.month - 1, +parts.day, +parts.hour, +parts.minute, +parts.second);
}

/**
 * A `datetime-local` value ("2026-11-25T09:30") read as a wall time in the workspace's zone → ISO 8601 UTC.
 * The zone's offset is found by formatting a guess back (twice, so a change of offset near the time is followed).
 * @returns {string|undefined}
 */
export function zonedToIso(local) {
  if (!local) return undefined;
  const [date, clock = '00:00'] = local.split('T');
  const [y, m, d] = date.split('-').map(Number);
  const [hh, mm, ss = 0] = clock.split(':').map(Number);
  const wanted = Date.UTC(y, m - 1, d, hh, mm, ss);
  let guess = wanted;
  for (let i = 0; i < 2; i++) guess += wanted - wallClock(new Date(guess), zone);
  return new Date(guess).toISOString();
}

/** Whether a text (from the address, say) is an instant a Date can hold. */
export const isInstant = (text) => Boolean(text) && !Number.isNaN(new Date(text).getTime());

/** An ISO instant as a `datetime-local` value in the workspace's zone; '' for none or for text that is no time. */
export function isoToZoned(iso) {
  if (!isInstant(iso)) return '';
  return new Date(wallClock(new Date(iso), zone)).toISOString().slice(0, 16);
}

// --- Forms: labelled fields, errors in words next to the field they concern.

/**
 * A labelled field: `<label for>` and its control, with a hint and a slot for its error (aria-describedby).
 * @param {string} label visible label
 * @param {HTMLElement} control an input, select or textarea (its `name` is what an API error's `reason` names)
 * @param {string} [hint]
 */
export function field(label, control, hint) {
  control.id ||= uid(control.name || 'field');
  const hintEl = hint ? h('p', { class: 'hint', id: `${control.id}-hint` }, hint) : null;
  const error = h('p', { class: 'field-error', id: `${control.id}-error`, hidden: true });
  control.setAttribute('aria-describedby', [hintEl?.id, error.id].filter(Boolean).join(' '));
  return h(
    'div',
    { class: 'field', 'data-field': control.name },
    h('label', { for: control.id }, label),
    hintEl,
    control,
    error,
  );
}

/** Clears a form's error messages. */
export function clearErrors(form) {
  for (const el of form.querySelectorAll('.field-error, .form-error')) {
    el.hidden = true;
    el.textContent = '';
  }
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
}

/**
 * Shows an API error in words: next to the field its `reason` names when the form has it (focused, unless
 * `focus` is false: a background refresh must not take the person's focus), else at the top of the form. A 401 is
 * the session ending, shown by the app itself.
 * @param {HTMLFormElement} form
 * @param {Error & {reason?: string}} err
 * @param {{focus?: boolean}} [options]
 */
export function showError(form, err, { focus = true } = {}) {
  const slot = err.reason ? form.querySelector(`[data-field="${CSS.escape(err.reason)}"]`) : null;
  if (slot) {
    const message = slot.querySelector('.field-error');
    message.textContent = err.message;
    message.hidden = false;
    slot.querySelector('input, select, textarea, fieldset')?.setAttribute('aria-invalid', 'true');
    if (focus) slot.querySelector('input, select, textarea')?.focus();
    return;
  }
  let top = form.querySelector(':scope > .form-error');
  if (!top) {
    top = h('p', { class: 'form-error', role: 'alert' });
    form.prepend(top);
  }
  top.textContent = err.message;
  top.hidden = false;
}

/**
 * Moves focus to `el` after a redraw removed the focused control (else focus falls to <body> and a keyboard or
 * screen reader user loses their place): a status line, a table's caption or a heading, made focusable by script only.
 */
export function focusOn(el) {
  if (!el) return;
  if (!el.hasAttribute('tabindex')) el.setAttribute('tabindex', '-1');
  el.focus();
}

/**
 * Keeps only the newest of overlapping loads: `newest(async (isNewest, ...args) => { const x = await ...; if
 * (!isNewest()) return; draw(x); })`. A late answer (a background refresh started before the person paged on) then
 * never redraws an older state over a newer one.
 */
export function newest(load) {
  let turn = 0;
  return (...args) => {
    const mine = ++turn;
    return load(() => mine === turn, ...args);
  };
}

/** A status line that screen readers announce (role=status). */
export function statusLine(text = '') {
  return h('p', { class: 'status', role: 'status' }, text);
}

/**
 * Asks for confirmation in a modal <dialog>: resolves true when the confirming button is pressed.
 * @param {{title: string, body: string, confirm: string, danger?: boolean}} options
 * @returns {Promise<boolean>}
 */
export function confirmDialog({ title, body, confirm, danger = false }) {
  return new Promise((resolve) => {
    const titleId = uid('dialog-title');
    const dialog = h(
      'dialog',
      { 'aria-labelledby': titleId },
      h(
        'form',
        { method: 'dialog' },
        h('h2', { id: titleId }, title),
        h('p', {}, body),
        h(
          'div',
          { class: 'actions' },
          h('button', { value: 'cancel', type: 'submit' }, 'Cancel'),
          h('button', { value: 'confirm', type: 'submit', class: danger ? 'danger' : 'primary' }, confirm),
        ),
      ),
    );
    dialog.addEventListener('close', () => {
      dialog.remove();
      resolve(dialog.returnValue === 'confirm');
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

/**
 * A secret shown this once: a read-only field, a Copy button (the clipboard, or the text selected when the clipboard
 * is refused) and the warning that it will not be shown again.
 * @param {string} label e.g. "New API key"
 * @param {string} value
 * @param {Node|string} [extra] more words under it
 */
export function shownOnce(label, value, extra) {
  const input = h('input', {
    type: 'text',
    readonly: true,
    value,
    class: 'secret',
    spellcheck: 'false',
    autocomplete: 'off',
  });
  const done = statusLine();
  const copy = h(
    'button',
    {
      type: 'button',
      onclick: async () => {
        try {
          await navigator.clipboard.writeText(value);
          done.textContent = 'Copied.';
        } catch {
          input.focus();
          input.select();
          done.textContent = 'Selected: press Ctrl+C (⌘C) to copy.';
        }
      },
    },
    'Copy',
  );
  return h(
    'div',
    { class: 'once' },
    field(label, input),
    h('div', { class: 'actions' }, copy),
    done,
    h('p', { class: 'warning' }, h('strong', {}, 'Copy it now: it will not be shown again.')),
    extra,
  );
}

/** A table with a caption and a header row; `rows` are arrays of cells (nodes or text). Wrapped to scroll when narrow. */
export function table(caption, headers, rows, empty = 'Nothing yet.') {
  const t = h(
    'table',
    {},
    h('caption', {}, caption),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        headers.map((name) => h('th', { scope: 'col' }, name)),
      ),
    ),
    h(
      'tbody',
      {},
      rows.map((cells) =>
        h(
          'tr',
          {},
          cells.map((cell, i) => h('td', { 'data-label': headers[i] }, cell)),
        ),
      ),
    ),
  );
  return h('div', { class: 'table-wrap' }, t, rows.length === 0 ? h('p', { class: 'empty' }, empty) : null);
}

/** A description list from [term, value] pairs. */
export function details(pairs) {
  return h(
    'dl',
    { class: 'details' },
    pairs.filter(Boolean).map(([term, value]) => [h('dt', {}, term), h('dd', {}, value)]),
  );
}

/** Pretty-printed JSON in a <pre>, labelled. */
export function jsonBlock(value, label) {
  return h('pre', { class: 'json', tabindex: '0', 'aria-label': label }, JSON.stringify(value, null, 2));
}
