// The document's Markdown (the event catalogue's summaries and descriptions) as the screen shows it: read as text and
// turned into a few plain elements, never parsed as HTML. Paragraphs, `-`/`*` lists, `code`, **strong** and *emphasis*
// become <p>, <ul>/<li>, <code>, <strong> and <em> (built with h(), so every character stays text); a link
// [text](url) is its text only (the screen links nowhere off its origin); anything else, HTML included, is shown as
// the characters it is.
import { h } from './dom.js';

/** `code`, **strong**, __strong__, *em*, _em_, [text](url), and a backslash escape, in the order they are tried. */
const INLINE =
  /`([^`]+)`|\*\*(.+?)\*\*|__(.+?)__|\*([^*\s](?:[^*]*[^*\s])?)\*|\b_([^_\s](?:[^_]*[^_\s])?)_\b|\[([^\]]+)\]\([^)\s]*\)|\\([\\`*_[\]()#+\-.!|<>])/g;

/**
 * One line or paragraph of inline Markdown as nodes and strings (strings go in as text nodes).
 * @param {string} text
 * @returns {Array<Node|string>}
 */
export function inlineMarkdown(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    const [, code, strong, strong2, em, em2, link, escaped] = m;
    if (code !== undefined) out.push(h('code', {}, code));
    else if (strong !== undefined || strong2 !== undefined)
      out.push(h('strong', {}, inlineMarkdown(strong ?? strong2)));
    else if (em !== undefined || em2 !== undefined) out.push(h('em', {}, inlineMarkdown(em ?? em2)));
    else if (link !== undefined) out.push(...inlineMarkdown(link));
    else out.push(escaped);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

const BULLET = /^\s*[-*]\s+/;

/**
 * A Markdown text as block elements: paragraphs (separated by a blank line; a single line break is a space) and
 * bulleted lists (from a block's first line that starts with `- ` or `* `; a line that does not continues its item).
 * @param {string} text
 * @returns {HTMLElement[]}
 */
export function markdownBlocks(text) {
  return text
    .split(/\n\s*\n/)
    .map((block) => block.trim())
    .filter(Boolean)
    .flatMap((block) => {
      const lines = block.split('\n');
      const first = lines.findIndex((line) => BULLET.test(line));
      const lead = first === -1 ? lines : lines.slice(0, first);
      const paragraph = lead.length ? [h('p', {}, inlineMarkdown(lead.map((l) => l.trim()).join(' ')))] : [];
      if (first === -1) return paragraph;
      const items = [];
      for (const line of lines.slice(first)) {
        if (BULLET.test(line)) items.push(line.replace(BULLET, ''));
        else items[items.length - 1] += ` ${line.trim()}`;
      }
      return [
        ...paragraph,
        h(
          'ul',
          {},
          items.map((item) => h('li', {}, inlineMarkdown(item))),
        ),
      ];
    });
}
