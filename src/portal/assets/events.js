// The event catalogue (listEventTypes): every event with its description, fields and example payload, and how a
// receiver verifies a signature (Standard Webhooks headers, as the README's receiver section describes them).
import { eventTypes, grouped } from './api.js';
import { h, jsonBlock, replace } from './dom.js';
import { inlineMarkdown, markdownBlocks } from './markdown.js';

/** The fields of an example `data`, dotted paths with their JSON types: [["bookingId", "string"], ...]. */
function fields(value, prefix = '') {
  return Object.entries(value ?? {}).flatMap(([name, v]) => {
    const path = prefix ? `${prefix}.${name}` : name;
    const type = v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v;
    return [[path, type], ...(type === 'object' ? fields(v, path) : [])];
  });
}

const slug = (name) => `event-${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`;

// Short receivers for the three headers, each checking the timestamp (5 minutes either way), every `v1,` signature
// of the header (two during a secret rotation's overlap) and comparing in constant time.
const VERIFY = [
  [
    'Node.js',
    `import crypto from 'node:crypto';

// secret: "whsec_..."; headers: the request's (lower-case names); rawBody: the body's bytes, before any parsing
export function verify(secret, headers, rawBody, toleranceSeconds = 300) {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'] ?? '';
  if (!id || !/^[0-9]+$/.test(timestamp)) return false;
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = crypto.createHmac('sha256', key).update(\`\${id}.\${timestamp}.\`).update(rawBody).digest();
  return (headers['webhook-signature'] ?? '').split(' ').some((entry) => {
    const [version, signature = ''] = entry.split(',');
    const given = Buffer.from(signature, 'base64');
    return version === 'v1' && given.length === expected.length && crypto.timingSafeEqual(given, expected);
  });
}`,
  ],
  [
    'Python',
    `import base64, hashlib, hmac, time

# secret: "whsec_..."; headers: the request's; raw_body: the body's bytes, before any parsing
def verify(secret: str, headers, raw_body: bytes, tolerance_seconds: int = 300) -> bool:
    msg_id = headers.get("webhook-id", "")
    timestamp = headers.get("webhook-timestamp", "")
    if not msg_id or not timestamp.isdigit() or abs(time.time() - int(timestamp)) > tolerance_seconds:
        return False
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + raw_body, hashlib.sha256).digest()
    expected = base64.b64encode(digest).decode()
    entries = (entry.partition(",") for entry in headers.get("webhook-signature", "").split())
    return any(version == "v1" and hmac.compare_digest(signature, expected) for version, _, signature in entries)`,
  ],
  [
    'Go',
    `import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// secret: "whsec_..."; rawBody: the body's bytes, before any parsing
func verify(secret string, header http.Header, rawBody []byte) bool {
	id, timestamp := header.Get("webhook-id"), header.Get("webhook-timestamp")
	t, err := strconv.ParseInt(timestamp, 10, 64)
	if id == "" || err != nil || time.Since(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(rawBody)
	expected := mac.Sum(nil)
	for _, entry := range strings.Fields(header.Get("webhook-signature")) {
		version, signature, _ := strings.Cut(entry, ",")
		given, err := base64.StdEncoding.DecodeString(signature)
		if version == "v1" && err == nil && hmac.Equal(given, expected) {
			return true
		}
	}
	return false
}`,
  ],
];

/** The receivers' code, for the test that runs them against the signature vectors. */
export const VERIFY_EXAMPLES = Object.fromEntries(VERIFY);

/** @param {import('./app.js').PageContext} ctx */
export async function eventsPage(ctx) {
  const types = await eventTypes();
  const groups = grouped(types);
  const contents = h(
    'nav',
    { 'aria-label': 'Event groups' },
    h(
      'ul',
      {},
      groups.map(([group]) => h('li', {}, h('a', { href: `#${slug(group)}` }, group))),
      h('li', {}, h('a', { href: '#verifying' }, 'Verifying signatures')),
    ),
  );
  const sections = groups.map(([group, events]) =>
    h(
      'section',
      { 'aria-labelledby': slug(group) },
      h('h2', { id: slug(group), tabindex: '-1' }, group),
      events.map((type) => {
        const list = fields(type.exampleData);
        return h(
          'article',
          { class: 'card event', 'aria-labelledby': slug(type.event) },
          h('h3', { id: slug(type.event) }, h('code', {}, type.event)),
          h('p', { class: 'summary' }, inlineMarkdown(type.summary)),
          h(
            'details',
            {},
            h('summary', {}, `Description, fields and example of ${type.event}`),
            // (the document's Markdown, as text and plain elements: markdown.js)
            h('div', { class: 'description' }, markdownBlocks(type.description)),
            h('h4', {}, 'Fields of data'),
            list.length
              ? h(
                  'ul',
                  { class: 'fields' },
                  list.map(([name, kind]) => h('li', {}, h('code', {}, name), ` (${kind})`)),
                )
              : h('p', {}, 'No fields.'),
            h('h4', {}, 'Example payload'),
            jsonBlock(
              {
                id: '4f1c2b3a-5d6e-4f70-8a9b-0c1d2e3f4a5b',
                event: type.event,
                createdAt: '2026-11-22T08:30:00.000Z',
                data: type.exampleData,
              },
              `Example payload of ${type.event}`,
            ),
          ),
        );
      }),
    ),
  );
  const verifying = h(
    'section',
    { 'aria-labelledby': 'verifying', class: 'card' },
    h('h2', { id: 'verifying', tabindex: '-1' }, 'Verifying signatures'),
    h(
      'p',
      {},
      'Every delivery carries the Standard Webhooks headers webhook-id, webhook-timestamp and webhook-signature. ',
      'Which to verify: a new receiver uses a Standard Webhooks library on these headers, v1a with the public key (whpk_) where the endpoint signs with ed25519 (the receiver then holds no secret), else v1 with the signing secret; service-signature is kept for existing receivers only. ',
      'A v1a signature is the base64 ed25519 signature of the same "<webhook-id>.<webhook-timestamp>.<raw body>", verified with the public key shown on the endpoint page. ',
      'A v1 signature is the base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<raw body>", keyed with the base64-decoded part of the signing secret after "whsec_". ',
      "During a secret rotation's overlap the header holds two signatures, separated by a space: accept the delivery if either matches. ",
      'Verify the raw body before parsing it, refuse a timestamp more than 5 minutes away, compare in constant time, answer 2xx within 10 seconds, and ignore a webhook-id you have already handled.',
    ),
    h(
      'p',
      {},
      "The official Standard Webhooks libraries (and Svix's) verify these deliveries with the same secret. Without a library:",
    ),
    VERIFY.map(([language, code]) => [
      h('h3', {}, language),
      h('pre', { class: 'code', tabindex: '0', 'aria-label': `${language} example` }, h('code', {}, code)),
    ]),
  );
  replace(
    ctx.main,
    ctx.heading('Event catalogue'),
    h('p', {}, "The events this service sends to webhook endpoints, grouped as in the API's description."),
    contents,
    sections,
    verifying,
  );
}
