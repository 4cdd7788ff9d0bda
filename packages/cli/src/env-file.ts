/**
 * The `.env` file: read line by line so that a bad value can say where it came from and
 * a malformed line is reported instead of silently skipped (Node's process.loadEnvFile does both
 * silently). The syntax is the common dotenv one: `NAME=value` with an optional `export ` prefix,
 * `#` comments and blank lines, values in '…', "…" (with \n escapes; may span lines) or `…`, and an
 * unquoted value ending at `#`. A later line for the same name wins.
 */

export interface EnvFileValue {
  readonly value: string;
  /** 1-based line of `NAME=` in the file. */
  readonly line: number;
}

export interface EnvFileProblem {
  readonly line: number;
  readonly problem: string;
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Parses the text of a .env file. Never echoes a value in a problem (it may be a password). */
export function parseEnvFile(text: string): { values: Map<string, EnvFileValue>; problems: EnvFileProblem[] } {
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  const values = new Map<string, EnvFileValue>();
  const problems: EnvFileProblem[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const lineNo = i + 1;
    const raw = (lines[i] as string).trim();
    if (raw === '' || raw.startsWith('#')) continue;
    const body = raw.startsWith('export ') ? raw.slice('export '.length).trimStart() : raw;
    const eq = body.indexOf('=');
    if (eq === -1) {
      problems.push({ line: lineNo, problem: 'expected NAME=value' });
      continue;
    }
    const name = body.slice(0, eq).trim();
    if (!NAME.test(name)) {
      problems.push({ line: lineNo, problem: 'the name before = must be letters, digits and _ (not starting with a digit)' });
      continue;
    }
    let rest = body.slice(eq + 1).trim();
    const quote = rest[0];
    if (quote === '"' || quote === "'" || quote === '`') {
      // The closing quote may be on a later line (a multi-line value).
      let j = i;
      let close = rest.indexOf(quote, 1);
      while (close === -1 && j + 1 < lines.length) {
        j += 1;
        rest = `${rest}\n${lines[j] as string}`;
        close = rest.indexOf(quote, 1);
      }
      if (close === -1) {
        problems.push({ line: lineNo, problem: `the quoted value of ${name} is not closed` });
        break;
      }
      const after = rest.slice(close + 1).trim();
      if (after !== '' && !after.startsWith('#')) {
        problems.push({ line: lineNo, problem: `unexpected text after the closing quote of ${name}` });
        i = j;
        continue;
      }
      let value = rest.slice(1, close);
      if (quote === '"') value = value.replace(/\\n/g, '\n').replace(/\\r/g, '\r');
      values.set(name, { value, line: lineNo });
      i = j;
      continue;
    }
    const hash = rest.indexOf('#');
    values.set(name, { value: (hash === -1 ? rest : rest.slice(0, hash)).trim(), line: lineNo });
  }
  return { values, problems };
}
