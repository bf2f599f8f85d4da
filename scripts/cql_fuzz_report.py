#!/usr/bin/env python3
"""The record of a cql_fuzz.py run kept in tests/cql: its kinds of divergence, every category where one server
accepts and the other refuses or the rows or state differ (one example each), and the largest categories where
both refuse.

    python3 scripts/cql_fuzz_report.py /tmp/cql_fuzz SEED tests/cql/fuzz-DATE-seedSEED.md
"""
import collections
import json
import sys

src, seed, out = sys.argv[1], sys.argv[2], sys.argv[3]
head = open(src + '/summary.md').read().split('\n')[2]
recs = [json.loads(l) for l in open(src + '/divergences.jsonl')]
kinds = collections.Counter(); cats = collections.defaultdict(set); first = {}; count = collections.Counter()
for r in recs:
    cat = r['category']
    kind = cat.split(':')[0]
    if kind.startswith('both reject, different class'):
        kind = 'both reject, different class'
    kinds[kind] += 1; cats[kind].add(cat); count[cat] += 1
    first.setdefault(cat, r)
def ans(o):
    if 'error' in o:
        return f"ERROR {o['error']}: {o['message'][:300]}"
    rows = '; '.join(' | '.join(x) for x in o['rows'][:3])
    return f"{' | '.join(o['columns'])} -> {o['nrows']} rows: {rows[:300]}"
L = [f"# CQL differential fuzz, seed {seed}", "", head, "", "| kind | divergences | categories |", "|---|---|---|"]
for k, v in kinds.most_common():
    L.append(f"| {k} | {v} | {len(cats[k])} |")
keep = ('cassandra accepts', 'sibyl accepts', 'different rows', 'state differs', 'schema differs', 'connection lost', 'timeout')
sel = [c for c, _ in count.most_common() if c.startswith(keep)]
L += ["", f"## Every category where one server accepts and the other refuses, or the rows or state differ ({len(sel)})", ""]
for c in sel:
    r = first[c]
    L.append(f"- {count[c]} × {c[:300]}")
    L.append(f"    > {r['statement'][:400]}")
    L.append(f"    cassandra: {ans(r['cassandra'])}")
    L.append(f"    sibyl:     {ans(r['sibyl'])}")
rest = [c for c, _ in count.most_common() if not c.startswith(keep)][:40]
L += ["", "## The 40 largest categories where both refuse", ""]
for c in rest:
    L.append(f"- {count[c]} × {c[:300]}")
open(out, 'w').write('\n'.join(L) + '\n')
print(f"{len(sel)} categories where the servers disagree on success, rows or state; written to {out}")
