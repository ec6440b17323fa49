/** Query parameters that carry a credential (`password`, `sentinelPassword`, `token`, ...). */
const SECRET_PARAM = /pass|pwd|secret|token|auth|key|cred/i;
const MASK = '***';

/** One URL with every credential masked: the password (or a lone user name) and secret query parameters. */
function redactOne(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = MASK;
    else if (u.username) u.username = MASK;
    for (const name of [...u.searchParams.keys()]) if (SECRET_PARAM.test(name)) u.searchParams.set(name, MASK);
    return u.toString();
  } catch {
    return url
      .replace(/\/\/[^/@?#]*@/, `//${MASK}@`)
      .replace(/([?&][^=&#]*(?:pass|pwd|secret|token|auth|key|cred)[^=&#]*=)[^&#]*/gi, `$1${MASK}`);
  }
}

/** `--redis` for a message: one URL, or a comma-separated list of cluster nodes. */
export function redactUrl(url: string): string {
  return url.split(',').map(redactOne).join(',');
}

/** The credentials a `--redis` value carries, as written and decoded. */
export function secretsOf(url: string): string[] {
  const out = new Set<string>();
  const add = (s: string) => {
    if (!s) return;
    out.add(s);
    try {
      out.add(decodeURIComponent(s));
    } catch {
      /* not percent-encoded */
    }
  };
  for (const part of url.split(',')) {
    try {
      const u = new URL(part);
      add(u.password || u.username);
      for (const [name, value] of u.searchParams) if (SECRET_PARAM.test(name)) add(value);
      // and each as written in the URL (percent-encoded, `+` for a space)
      for (const m of part.matchAll(/[?&]([^=&#]*)=([^&#]*)/g))
        if (SECRET_PARAM.test(m[1] as string)) add(m[2] as string);
    } catch {
      const userinfo = /\/\/([^/@?#]*)@/.exec(part)?.[1] ?? '';
      add(userinfo.includes(':') ? userinfo.slice(userinfo.indexOf(':') + 1) : userinfo);
    }
  }
  return [...out].filter((s) => s !== MASK);
}

/** `text` with every occurrence of each secret replaced by `***` (the longest first). */
export function scrub(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) out = out.split(s).join(MASK);
  return out;
}
