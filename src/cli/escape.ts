/**
 * Characters a terminal may act on instead of printing: C0 and C1 controls,
 * DEL, line and paragraph separators, and the bidirectional overrides that can
 * reorder what a reader sees.
 */
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * Text for a table or a message: each unsafe character becomes `\n`, `\r`,
 * `\t` or `\uXXXX` (ESC is `\u001b`). Applied to ref text (whose own
 * backslashes are already doubled) the result still reads back with
 * `parseRefText`, so a ref printed by `list` can be pasted into `show`.
 */
export function escapeControl(text: string): string {
  return text.replace(UNSAFE, (c) => NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
