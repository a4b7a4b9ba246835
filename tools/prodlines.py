#!/usr/bin/env python3
"""Counts the production lines of the store and search modules (issue 55's
line target): every line of every .rs file under node/src/store and
node/src/search except test files (*_tests.rs, tests.rs) and items behind
#[cfg(test)] (a `mod x { ... }` block to its closing brace, or one item).

Usage: tools/prodlines.py [REPO_ROOT]   prints lines per file and the total.
"""
import os, sys, re
root = sys.argv[1] if len(sys.argv) > 1 else '.'
tot = 0; rows = []
for d in ('node/src/store', 'node/src/search'):
    for dp, _, fs in os.walk(os.path.join(root, d)):
        for f in fs:
            if not f.endswith('.rs') or f.endswith('_tests.rs') or f == 'tests.rs':
                continue
            lines = open(os.path.join(dp, f)).read().split('\n')
            n = 0; i = 0
            while i < len(lines):
                l = lines[i]
                if l.strip() == '#[cfg(test)]':
                    j = i + 1
                    if j < len(lines) and re.match(r'^\s*(pub(\(\w+\))? )?mod \w+ \{', lines[j]):
                        ind = len(lines[j]) - len(lines[j].lstrip())
                        k = j + 1
                        while k < len(lines) and not (lines[k].startswith(' ' * ind + '}') and len(lines[k]) - len(lines[k].lstrip()) == ind):
                            k += 1
                        i = k + 1; continue
                    # a single item: skip to the end of the statement / block
                    k = j; depth = 0
                    while k < len(lines):
                        depth += lines[k].count('{') - lines[k].count('}')
                        if depth <= 0 and (lines[k].rstrip().endswith(';') or lines[k].rstrip().endswith('}')):
                            break
                        k += 1
                    i = k + 1; continue
                n += 1; i += 1
            rel = os.path.relpath(os.path.join(dp, f), root)
            rows.append((n, rel)); tot += n
for n, r in sorted(rows):
    print(n, r)
print(tot, 'TOTAL')
