#!/usr/bin/env python3
"""
Applies mutants by hand, one at a time, and says whether a suite kills each
(docs/testing.md: how an undetected Stryker or Lua mutant is shown killed).

  python3 scripts/mutants-by-hand.py <source file> <cases.json>

cases.json: a list of [old text, new text, test file, optional jest -t pattern];
`old` must occur exactly once in the source. For each case the source is
edited, `npx jest <test file>` runs (REDIS_URL defaults to the local Redis),
KILLED (the suite failed) or SURVIVED is printed, and the source is restored,
also if the run is interrupted. Cases used: reports/by-hand/.
"""
import json, os, subprocess, sys
src, cases = sys.argv[1], json.load(open(sys.argv[2]))
orig = open(src).read()
env = dict(os.environ)
env.setdefault('REDIS_URL', 'redis://127.0.0.1:6379')
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
  for c in cases:
      old, new, test = c[0], c[1], c[2]
      pat = c[3] if len(c) > 3 else None
      n = orig.count(old)
      if n != 1:
          print('AMBIGUOUS' if n else 'NOTFOUND', repr(old)[:80]); continue
      open(src, 'w').write(orig.replace(old, new))
      cmd = ['nice', '-n', '10', 'npx', 'jest', test, '--forceExit', '--silent']
      if pat: cmd += ['-t', pat]
      r = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
      print('KILLED ' if r.returncode else 'SURVIVED', repr(old)[:70], '=>', repr(new)[:50], flush=True)
      open(src, 'w').write(orig)
finally:
  open(src, 'w').write(orig)
