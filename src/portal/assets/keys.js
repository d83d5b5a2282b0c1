// API keys: the list (role, created, last used, expiry, revoked), a new key shown once, revocation confirmed.
import { admin } from './api.js';
import {
  clearErrors,
  confirmDialog,
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
  zonedToIso,
} from './dom.js';

/** @param {import('./app.js').PageContext} ctx */
export async function keysPage(ctx) {
  const list = h('div', { 'data-live': '' });
  const announce = statusLine();

  const load = newest(async (isNewest) => {
    const { rows } = await admin('GET', '/api-keys');
    if (!isNewest()) return;
    replace(
      list,
      table(
        'API keys of this workspace, oldest first',
        ['Role', 'Created', 'Last used', 'Expires', 'Revoked', ...(ctx.readOnly ? [] : ['Actions'])],
        rows.map((key) => [
          key.role ?? h('span', { class: 'muted' }, '(no role)'),
          time(key.createdAt),
          time(key.lastUsedAt, 'never'),
          time(key.expiresAt, 'never'),
          key.revokedAt ? time(key.revokedAt) : 'no',
          ...(ctx.readOnly
            ? []
            : [
                key.revokedAt
                  ? ''
                  : h(
                      'button',
                      {
                        type: 'button',
                        class: 'danger',
                        'aria-label': `Revoke key ${key.role ?? 'without a role'} created ${formatTime(key.createdAt)}`,
                        onclick: async () => {
                          const sure = await confirmDialog({
                            title: 'Revoke this API key?',
                            body: 'Every request made with it is refused from now on. This cannot be undone.',
                            confirm: 'Revoke key',
                            danger: true,
                          });
                          if (!sure) return;
                          try {
                            await admin('POST', `/api-keys/${encodeURIComponent(key.id)}/revoke`);
                            announce.textContent = 'The key is revoked.';
                          } catch (err) {
                            announce.textContent = err.message;
                          }
                          await load().catch(() => {});
                          // The dialog gave focus back to this button, which the reload removed: the outcome's line takes it.
                          focusOn(announce);
                        },
                      },
                      'Revoke',
                    ),
              ]),
        ]),
        'This workspace has no API keys yet.',
      ),
    );
  });
  await load();

  const shown = h('div');
  let form = null;
  if (!ctx.readOnly) {
    const role = h('input', { type: 'text', name: 'role', maxlength: '64', autocomplete: 'off' });
    const expires = h('input', { type: 'datetime-local', name: 'expiresAt' });
    form = h(
      'form',
      { class: 'card', novalidate: true },
      h('h2', {}, 'Create an API key'),
      h('p', {}, "A key reads this workspace's data through the public API. It is shown once, when it is made."),
      field('Role (optional)', role, 'A name for what the key is for, e.g. "reporting".'),
      field('Expires (optional)', expires, `In ${timeZone()} time. Leave empty for a key that does not expire.`),
      h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create key')),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      clearErrors(form);
      const body = {};
      if (role.value.trim()) body.role = role.value.trim();
      if (expires.value) body.expiresAt = zonedToIso(expires.value);
      try {
        const created = await admin('POST', '/api-keys', body);
        form.reset();
        replace(
          shown,
          shownOnce(
            'New API key',
            created.key,
            h('div', { class: 'actions' }, h('button', { type: 'button', onclick: () => replace(shown) }, 'Done')),
          ),
        );
        shown.querySelector('input').focus();
        await load();
      } catch (err) {
        showError(form, err);
      }
    });
  }

  replace(ctx.main, ctx.heading('API keys'), announce, shown, list, form);
}
