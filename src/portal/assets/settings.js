// The workspace's settings a workspace's staff may change: Reminders ahead (1 to 60 days) and the time zone.
import { admin, setWorkspace } from './api.js';
import { clearErrors, field, h, replace, setTimeZone, showError, statusLine } from './dom.js';

/** @param {import('./app.js').PageContext} ctx */
export async function settingsPage(ctx) {
  const workspace = await admin('GET', '');
  const zones = Intl.supportedValuesOf ? Intl.supportedValuesOf('timeZone') : [];
  if (!zones.includes(workspace.timezone)) zones.unshift(workspace.timezone);
  if (!zones.includes('UTC')) zones.unshift('UTC');
  const reminders = h('input', {
    type: 'number',
    name: 'remindersAhead',
    min: '1',
    max: '60',
    step: '1',
    required: true,
    inputmode: 'numeric',
    value: String(workspace.remindersAhead),
    disabled: ctx.readOnly,
  });
  const timezone = h(
    'select',
    { name: 'timezone', disabled: ctx.readOnly },
    zones.map((zone) => h('option', { value: zone, selected: zone === workspace.timezone }, zone)),
  );
  const done = statusLine();
  const form = h(
    'form',
    { class: 'card', novalidate: true },
    field('Reminders ahead (days)', reminders, 'How many days ahead the due-soon reminders are sent: 1 to 60.'),
    field('Time zone', timezone, '"Today" and "this month" are on this calendar; this screen shows times in it too.'),
    ctx.readOnly
      ? h('p', {}, 'This session is read only: the settings cannot be changed.')
      : h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Save settings')),
    done,
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    clearErrors(form);
    done.textContent = '';
    const days = Number(reminders.value);
    if (reminders.value === '' || !Number.isInteger(days) || days < 1 || days > 60) {
      showError(form, { reason: 'remindersAhead', message: 'Enter a whole number of days from 1 to 60.' });
      return;
    }
    const body = {};
    if (days !== workspace.remindersAhead) body.remindersAhead = days;
    if (timezone.value !== workspace.timezone) body.timezone = timezone.value;
    if (Object.keys(body).length === 0) {
      done.textContent = 'Nothing to save: nothing was changed.';
      return;
    }
    try {
      Object.assign(workspace, await admin('PATCH', '', body));
      setWorkspace(workspace);
      setTimeZone(workspace.timezone);
      done.textContent = 'Settings saved.';
    } catch (err) {
      showError(form, err);
    }
  });
  replace(ctx.main, ctx.heading('Settings'), h('p', {}, `Workspace ${workspace.slug}.`), form);
}
