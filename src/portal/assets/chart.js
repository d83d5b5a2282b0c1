// An endpoint's attempts by outcome over time: stacked bars drawn as SVG (no library, nothing fetched), with a
// <title>/<desc> and a visually hidden table of the same figures for screen readers.
import { admin } from './api.js';
import { formatTime, h, replace, svg } from './dom.js';

const OUTCOMES = [
  ['succeeded', 'Succeeded (2xx)'],
  ['failedStatus', 'Failed: another status'],
  ['failedNoAnswer', 'Failed: no answer'],
];
const WIDTH = 600;
const HEIGHT = 160;
const PAD = { top: 10, right: 8, bottom: 22, left: 34 };
const PERIODS = [
  ['24h', 'Last 24 hours'],
  ['7d', 'Last 7 days'],
];

/**
 * The chart of one endpoint, with its period toggle (24 h / 7 d). Returns the element and a refresh function.
 * @param {string} endpointId
 */
export function attemptsChart(endpointId) {
  let period = '24h';
  const figure = h('div', { class: 'chart-body' });
  const buttons = PERIODS.map(([value, label]) =>
    h(
      'button',
      {
        type: 'button',
        'aria-pressed': String(value === period),
        onclick: async () => {
          period = value;
          buttons.forEach((b, i) => b.setAttribute('aria-pressed', String(PERIODS[i][0] === value)));
          await refresh();
        },
      },
      label,
    ),
  );
  const titleId = `chart-title-${endpointId}`;
  const section = h(
    'section',
    { class: 'chart', 'aria-labelledby': titleId },
    h('h2', { id: titleId }, 'Attempts by outcome'),
    h('div', { class: 'toggle', role: 'group', 'aria-label': 'Period' }, buttons),
    figure,
    h(
      'ul',
      { class: 'legend' },
      OUTCOMES.map(([key, label]) => h('li', {}, h('span', { class: `swatch ${key}`, 'aria-hidden': 'true' }), label)),
    ),
  );

  async function refresh() {
    const stats = await admin('GET', `/endpoints/${encodeURIComponent(endpointId)}/attempt-stats?period=${period}`);
    replace(figure, draw(stats, PERIODS.find(([v]) => v === period)[1]));
  }
  return { element: section, refresh };
}

/** The SVG and the hidden table of one answer of attempt-stats. */
function draw(stats, periodLabel) {
  const buckets = stats.buckets;
  const totals = buckets.map((b) => b.succeeded + b.failedStatus + b.failedNoAnswer);
  const sum = (key) => buckets.reduce((n, b) => n + b[key], 0);
  const max = Math.max(1, ...totals);
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const slot = plotW / Math.max(1, buckets.length);
  const barW = Math.max(1, slot * 0.8);
  const y = (n) => PAD.top + plotH - (n / max) * plotH;

  const summary = `${periodLabel}: ${sum('succeeded')} succeeded, ${sum('failedStatus')} failed with another status, ${sum('failedNoAnswer')} without an answer.`;
  const titleId = `t-${stats.endpointId}-${stats.period}`;
  const descId = `d-${stats.endpointId}-${stats.period}`;
  const bars = [];
  buckets.forEach((bucket, i) => {
    let base = 0;
    for (const [key] of OUTCOMES) {
      const n = bucket[key];
      if (!n) continue;
      bars.push(
        svg('rect', {
          class: `bar ${key}`,
          x: (PAD.left + i * slot + (slot - barW) / 2).toFixed(1),
          y: y(base + n).toFixed(1),
          width: barW.toFixed(1),
          height: (y(base) - y(base + n)).toFixed(1),
        }),
      );
      base += n;
    }
  });
  const picture = svg(
    'svg',
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: 'img', 'aria-labelledby': `${titleId} ${descId}`, class: 'chart-svg' },
    svg('title', { id: titleId }, `Attempts by outcome, ${periodLabel.toLowerCase()}.`),
    svg('desc', { id: descId }, summary),
    svg('line', { class: 'axis', x1: PAD.left, y1: PAD.top + plotH, x2: WIDTH - PAD.right, y2: PAD.top + plotH }),
    svg('line', { class: 'axis', x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: PAD.top + plotH }),
    svg('text', { class: 'tick', x: PAD.left - 4, y: PAD.top + 4, 'text-anchor': 'end' }, String(max)),
    svg('text', { class: 'tick', x: PAD.left - 4, y: PAD.top + plotH, 'text-anchor': 'end' }, '0'),
    buckets.length ? svg('text', { class: 'tick', x: PAD.left, y: HEIGHT - 6 }, shortTime(buckets[0].start)) : null,
    svg('text', { class: 'tick', x: WIDTH - PAD.right, y: HEIGHT - 6, 'text-anchor': 'end' }, 'now'),
    bars,
  );

  // (a table ignores a width of 1px: the wrapper is what is hidden)
  const figures = h(
    'div',
    { class: 'visually-hidden' },
    h(
      'table',
      {},
      h('caption', {}, `Attempts by outcome, ${periodLabel.toLowerCase()}, per ${stats.bucketSeconds / 3600} hours`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'From'),
          OUTCOMES.map(([, label]) => h('th', { scope: 'col' }, label)),
        ),
      ),
      h(
        'tbody',
        {},
        buckets.map((b) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row' }, formatTime(b.start)),
            OUTCOMES.map(([key]) => h('td', {}, String(b[key]))),
          ),
        ),
      ),
    ),
  );
  return [picture, h('p', { class: 'chart-summary', 'aria-hidden': 'true' }, summary), figures];
}

function shortTime(iso) {
  return formatTime(iso).replace(/:\d\d(?= )/, '');
}
