/**
 * Text for a terminal: control characters other than newline and tab shown as \u{...}, since the text carries what
 * others wrote (a receiver's answer, an endpoint's name) and an escape sequence in it would drive the operator's
 * terminal. (JSON output escapes them already.)
 */
export function printable(text: string): string {
  // eslint-disable-next-line no-control-regex -- control characters are what it looks for
  return text.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) => `\\u{${c.charCodeAt(0).toString(16)}}`);
}
