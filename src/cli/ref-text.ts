import { InvalidStageRefError } from '../errors';
import { parseStageId, stageId, stageIdOfJobId } from '../stage-ref';
import type { StageRef } from '../types';

const CONTROL_ESCAPES: Record<string, string> = { n: '\n', r: '\r', t: '\t' };

/**
 * A stage as the CLI takes it: its id as Bull Board's job ids show it
 * (`book-1/ch-2/sc-7/image`, percent-encoded segments; a wake-up's whole job
 * id `book-1/ch-2/sc-7/image@cap.…` too), or the CLI's text form below.
 */
export function parseStageArg(text: string): StageRef {
  if (/[:\\]/.test(text)) return parseRefText(text);
  // a job id's tail (`@cap.…`, `@idem.…`, `@r.…`, `@j.…`) names its stage; any other `@` is no
  // part of a stage id (it is written %40), so the text is not one
  const at = text.indexOf('@');
  if (at >= 0 && !/^@(cap|idem|r|j)\./.test(text.slice(at)))
    throw new InvalidStageRefError(
      `Cannot read the stage ${JSON.stringify(text)}: a raw \`@\` is no part of a stage id (write %40), ` +
        'and what follows it is not a job id of the stage',
    );
  const id = stageIdOfJobId(text);
  let ref: StageRef;
  try {
    ref = parseStageId(id);
  } catch {
    throw new InvalidStageRefError(`Cannot read the stage ${JSON.stringify(text)}: a segment has a bad %-escape`);
  }
  if (ref.scope.length === 0) {
    throw new InvalidStageRefError(
      `Cannot read the stage ${JSON.stringify(text)}: expected its id as job ids show it, \`book-1/ch-2/sc-7/image\`, ` +
        `or \`book-1/ch-2/sc-7:image\``,
    );
  }
  // the id must be the stage's own encoding (`%2F` for a `/` inside a segment, never a raw `%`)
  if (stageId(ref) !== id)
    throw new InvalidStageRefError(
      `Cannot read the stage ${JSON.stringify(text)}: not a stage id as job ids show it (it would read ${JSON.stringify(stageId(ref))})`,
    );
  return ref;
}

/**
 * The CLI's text form of a stage ref: scope segments joined by `/`, then `:`
 * and the stage kind, e.g. `book-1/ch-2/sc-7:image`. A backslash escapes the
 * next `/`, `:` or `\` inside a segment (`a\/b:image` is the scope `['a/b']`).
 * `formatRefText` and `parseRefText` are inverses. `parseRefText` also reads
 * `\n`, `\r`, `\t` and `\uXXXX`, the escapes of control characters in the
 * CLI's tables (`escapeControl`), so a printed ref can be pasted back.
 */
export function parseRefText(text: string): StageRef {
  const segments: string[] = [];
  let current = '';
  let stage: string | undefined;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i] as string;
    if (ch === '\\') {
      const next = text[i + 1];
      const hex = next === 'u' ? /^[0-9a-fA-F]{4}$/.exec(text.slice(i + 2, i + 6))?.[0] : undefined;
      if (hex !== undefined) {
        current += String.fromCharCode(parseInt(hex, 16));
        i += 5;
      } else if (next !== undefined && next in CONTROL_ESCAPES) {
        current += CONTROL_ESCAPES[next];
        i++;
      } else if (next !== '/' && next !== ':' && next !== '\\') {
        throw new InvalidStageRefError(
          `Cannot read the stage ref ${JSON.stringify(text)}: a backslash must be followed by \`/\`, \`:\`, \`\\\`, ` +
            `or (as the CLI prints control characters) \`n\`, \`r\`, \`t\` or \`uXXXX\` (at ${i + 1})`,
        );
      } else {
        current += next;
        i++;
      }
    } else if (ch === '/' && stage === undefined) {
      segments.push(current);
      current = '';
    } else if (ch === ':' && stage === undefined) {
      segments.push(current);
      current = '';
      stage = '';
    } else if (ch === ':' || ch === '/') {
      throw new InvalidStageRefError(
        `Cannot read the stage ref ${JSON.stringify(text)}: the stage kind after \`:\` must not contain an unescaped \`${ch}\``,
      );
    } else {
      current += ch;
    }
  }
  if (stage === undefined) {
    throw new InvalidStageRefError(
      `Cannot read the stage ref ${JSON.stringify(text)}: expected \`<scope>/<scope>:<stage>\`, e.g. \`book-1/ch-2/sc-7:image\``,
    );
  }
  const ref = { scope: segments, stage: current };
  stageId(ref); // validates: non-empty segments, depth, length
  return ref;
}

const escape = (segment: string) => segment.replace(/[\\/:]/g, (c) => `\\${c}`);

/** `book-1/ch-2/sc-7:image` for `{ scope: ['book-1', 'ch-2', 'sc-7'], stage: 'image' }`. */
export function formatRefText(ref: StageRef): string {
  return `${ref.scope.map(escape).join('/')}:${escape(ref.stage)}`;
}
