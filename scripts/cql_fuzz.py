#!/usr/bin/env python3
"""Differential CQL fuzzer: Sibyl against Apache Cassandra 5.0.4.

    .venv/bin/python scripts/cql_fuzz.py [--seed N] [--duration 30m | --count N] [--out DIR]
            [--sibyl HOST:PORT] [--cassandra HOST:PORT] [--timeout S] [--keep] [--verbose]

Generates CQL after the productions of Cassandra's Parser.g / Lexer.g (SELECT with random selectors and
relations, INSERT / UPDATE / DELETE / BATCH with random values, USING and IF clauses, DDL on scratch objects,
token-level mutations for the invalid side), runs each statement on both servers at once and compares: the
same column names and rows (multisets unless the order is defined), or the same error class and message.
Output in OUT: divergences.jsonl, statements.cql (all statements run), summary.md (also on stdout). Nothing
nondeterministic is generated (no now(); fixed USING TIMESTAMPs; writetime() / ttl() only where every cell
has one); tables whose states may have diverged are truncated and re-filled on both servers.
"""
import argparse
import collections
import json
import logging
import os
import random
import re
import sys
import time

from cassandra.cluster import Cluster, ExecutionProfile, EXEC_PROFILE_DEFAULT
from cassandra.policies import WhiteListRoundRobinPolicy
from cassandra.query import SimpleStatement

logging.getLogger("cassandra").setLevel(logging.CRITICAL)

# ---------------------------------------------------------------------------------------------- literals
NATIVE = "int bigint text ascii varint decimal double float boolean blob uuid timeuuid timestamp date time duration inet " \
         "tinyint smallint".split()
NUMERIC = set("int bigint varint decimal double float tinyint smallint counter".split())
# One pool per type, covering the lexer's token kinds (INTEGER, FLOAT, STRING_LITERAL incl. $$..$$, HEXNUMBER,
# UUID, the three DURATION forms, BOOLEAN, NaN / Infinity). The first four entries are the "domain" the base
# data mostly uses, so that generated relations match rows.
POOL = {k: v.split("|") for k, v in {
    "int": "0|1|2|3|4|5|-1|2147483647|-2147483648", "bigint": "0|1|2|3|-7|9223372036854775807|-9223372036854775808",
    "varint": "0|1|2|-3|123456789012345678901234567890", "decimal": "0|1.5|-2.25|3|1E+3|0.001|12345678901234567890.123456789",
    "double": "0.0|1.5|-2.5|3|1e300|NaN|Infinity|-Infinity|0.1", "float": "0.0|1.5|-2.5|3|3.4e38|NaN|-Infinity|0.1",
    "boolean": "true|false|TRUE|False", "text": "'a'|'b'|'x'|'y'|'hello world'|''|'it''s'|$$dol$lar$$|'\u00fcn\u00ef'",
    "ascii": "'a'|'b'|'x'|'abc'|''", "blob": "0x00|0x01|0x0000000000000001|0xdeadbeef|0x|0x00000002",
    "uuid": "00000000-0000-0000-0000-000000000000|9b3e1e2a-8d1c-4c5e-9f0a-1b2c3d4e5f60|"
            "123e4567-e89b-12d3-a456-426614174000|50554d6e-29bb-11e5-b345-feff819cdc9f",
    "timeuuid": "50554d6e-29bb-11e5-b345-feff819cdc9f|d2177dd0-eaa2-11de-a572-001b779c76e3|"
                "123e4567-e89b-12d3-a456-426614174000|00000000-0000-1000-8000-000000000000",
    "timestamp": "'2024-01-02 03:04:05+0000'|'1970-01-01 00:00:00+0000'|1704164645000|0|'2024-01-02 03:04:05.678+0000'|"
                 "'2024-01-02T03:04:05Z'|-1000",
    "date": "'2024-01-02'|'1970-01-01'|'2000-02-29'|2147483648|'-0001-01-01'|0",
    "time": "'08:12:54'|'00:00:00'|'23:59:59.999999999'|1000000|'12:00:00.5'",
    "duration": "1h30m|P1Y2M|2d|-1mo|P0001-02-03T04:05:06|1us|3ns|P2W|0s|1y2mo3w4d5h6m7s8ms9us10ns",
    "inet": "'127.0.0.1'|'::1'|'2001:db8::7'|'10.0.0.255'", "tinyint": "0|1|2|-128|127", "smallint": "0|1|2|-32768|32767",
    "counter": "1|2|-1|10"}.items()}
POOL["varchar"] = POOL["text"]
BAD = ("2147483648|1.5|'1'|128|0xabc|'1.2.3'|'2024-13-01'|'25:00:00'|'not a date'|'\u00e9'|[1, 2]|{'a': 1}|(1, 2, 3)|{}|[]|"
       "1e400|99999999999999999999|0x00000001000000020000|'00000000-0000-0000-0000-00000000000g'|-|?|:name|P|'abc|1mo1mo|"
       "token(1)|nosuchfn(1)|(int) 'a'|(text) 1|{x: 1}|NULL").split("|")
NONDETERMINISTIC = ("now()", "uuid()", "current")


def parse_type(s):
    """A system_schema type to a tree: 'frozen<map<text, int>>' -> ('frozen', ('map', 'text', 'int')),
    'tuple<int, text>' -> ('tuple', ('int', 'text')), a UDT -> ('udt', name), a native type -> its name."""
    toks, pos = re.findall(r"[\w.']+|[<>,]", s), [0]

    def one():
        name = toks[pos[0]] if toks[pos[0]].startswith("'") else toks[pos[0]].lower()
        pos[0] += 1
        if pos[0] < len(toks) and toks[pos[0]] == "<":
            args = []
            while toks[pos[0]] in "<,":
                pos[0] += 1
                args.append(int(toks[pos[0]]) if toks[pos[0]].isdigit() else one())
                pos[0] += isinstance(args[-1], int)
            pos[0] += 1  # '>'
            return ("tuple", tuple(args)) if name == "tuple" else (name,) + tuple(args)
        return name if name in POOL or name.startswith("'") else ("udt", name)
    try:
        return one()
    except IndexError:
        return "blob"


def base_of(t):
    while isinstance(t, tuple) and t[0] == "frozen":
        t = t[1]
    return t


def is_a(t, kinds=("list", "set", "map")):
    b = base_of(t)
    return not isinstance(b, str) and b[0] in kinds



def element_type(t):
    """The type a CONTAINS on a column of type t compares with: a collection's
    (or vector's) element, a map's value; a scalar's own type."""
    if isinstance(t, str):
        return t
    if t[0] == "frozen":
        return element_type(t[1])
    if t[0] in ("list", "set", "vector"):
        return t[1]
    if t[0] == "map":
        return t[2]
    return "int"

class Stmt:
    def __init__(self, cql, kind, tables=(), ordered=False):
        self.cql, self.kind, self.tables, self.ordered = cql, kind, set(tables), ordered


class Table:
    def __init__(self, name):
        self.name, self.cols, self.pk, self.ck, self.static, self.ck_desc, self.counter = name, {}, [], [], [], set(), False

    def regular(self):
        return [k for k in self.cols if k not in self.pk + self.ck]


# --------------------------------------------------------------------------------------------- generator
class Gen:
    """The statement generator. Every random choice goes through self.r, so a seed fixes the stream."""
    FUNCS = {  # selector functions by argument family (Cassandra 5.0 native functions), misfits are chosen too
        "num": "abs exp log log10 round toJson to_json min max sum avg count",
        "text": "mask_null mask_default mask_hash toJson min max count textAsBlob text_as_blob",
        "blob": "blobAsText blobAsInt blobAsBigint blob_as_int blobAsVarint toJson mask_default",
        "timeuuid": "toDate toTimestamp toUnixTimestamp to_date dateOf unixTimestampOf min max",
        "timestamp": "toDate toUnixTimestamp to_unix_timestamp minTimeuuid maxTimeuuid min max",
        "date": "toTimestamp toUnixTimestamp to_timestamp min max", "map": "map_keys map_values collection_count toJson",
        "coll": "collection_count collection_min collection_max collection_sum collection_avg toJson",
        "any": "toJson count min max mask_null mask_default typeAsBlob"}
    TYPES_DDL = NATIVE + ("varchar|counter|list<int>|set<text>|map<text, int>|frozen<list<int>>|frozen<map<int, text>>|"
                          "tuple<int, text>|addr|frozen<addr>|vector<float, 3>|list<frozen<addr>>|set<frozen<list<int>>>|"
                          "map<int, frozen<set<text>>>|nosuchtype|list<list<int>>|s_ty0|frozen<s_ty0>|set<duration>|"
                          "list<counter>|frozen<int>|'org.apache.cassandra.db.marshal.BytesType'|map<text>|tuple<>").split("|")
    KEY_TYPES = [t for t in NATIVE if t != "duration"] + ["frozen<list<int>>", "frozen<addr>", "tuple<int, text>"]
    TABLE_OPTS = (
        "comment = 'fuzz'|gc_grace_seconds = 3600|gc_grace_seconds = -1|default_time_to_live = 0|default_time_to_live = -5|"
        "bloom_filter_fp_chance = 0.01|bloom_filter_fp_chance = 2.0|caching = {'keys': 'ALL', 'rows_per_partition': 'NONE'}|"
        "caching = {'keys': 'bogus'}|compaction = {'class': 'SizeTieredCompactionStrategy'}|compaction = {'class': 'Nope'}|"
        "compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': 160}|compression = {'enabled': 'false'}|"
        "compaction = {'class': 'UnifiedCompactionStrategy'}|compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 64}|"
        "compression = {'class': 'LZ4Compressor', 'chunk_length_in_kb': 3}|speculative_retry = '99p'|speculative_retry = 'NONE'|"
        "speculative_retry = 'bogus'|crc_check_chance = 0.5|crc_check_chance = 5|read_repair = 'BLOCKING'|cdc = false|"
        "memtable_flush_period_in_ms = 0|read_repair = 'bogus'|additional_write_policy = '99p'|max_index_interval = 2048|"
        "min_index_interval = 4096|nosuchoption = 1|comment = 1|id = 'x'|extensions = {}|COMPACT STORAGE|"
        "allow_auto_snapshot = true|comment = 'a' AND comment = 'b'").split("|")
    REPLICATION = ("{'class': 'SimpleStrategy', 'replication_factor': 1}|{'class': 'SimpleStrategy'}|{'class': 'Nope'}|"
                   "{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}|{}|{'class': 'SimpleStrategy', 'replication_factor': 'x'}|"
                   "{'class': 'SimpleStrategy', 'replication_factor': 1, 'bogus': 2}").split("|")
    S_TABLES, S_TYPES, S_IDX = ["s_t0", "s_t1", "s_t2"], ["s_ty0", "s_ty1"], ["s_ix0", "s_ix1", "s_ix2"]
    KEYWORDS = ("SELECT FROM WHERE AND IN CONTAINS KEY TOKEN LIMIT ALLOW FILTERING ORDER BY GROUP PER PARTITION DISTINCT JSON "
                "CAST AS TTL WRITETIME NULL IF EXISTS NOT USING TIMESTAMP SET VALUES INTO BATCH APPLY BEGIN DESC ASC STATIC "
                "PRIMARY FROZEN LIST MAP TABLE WITH TO ADD DROP UNSET DEFAULT LIKE").split()
    TOKEN_RE = re.compile(r"\$\$.*?\$\$|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|0x[0-9a-fA-F]*|"
                          r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|"
                          r"-?P\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?:[a-zA-Z\u00b5]+\d*)*|"
                          r"\w+|<=|>=|!=|\+=|-=|\.\.|\S")

    def __init__(self, seed, ks):
        self.r, self.ks = random.Random(seed), ks
        self.tables, self.udts = {}, {}  # the model, read from Cassandra's system_schema
        self.dirty = collections.defaultdict(set)  # table -> {"wt", "ttl"}: writetime / ttl not deterministic

    def p(self, x):
        return self.r.random() < x

    def pick(self, pool):
        return self.r.choice(pool[:4]) if self.p(0.75) else self.r.choice(pool)

    def choice(self, *xs):
        return self.r.choice(xs)

    def weighted(self, *pairs):
        """Calls one of the (weight, function) pairs, chosen by weight."""
        x = self.r.random() * sum(w for w, _ in pairs)
        for w, f in pairs:
            x -= w
            if x < 0:
                return f()
        return pairs[0][1]()

    # -- values
    def lit(self, t, depth=0):
        """A valid literal of type t (collection literals have 0-3 elements)."""
        if isinstance(t, str):
            return self.pick(POOL.get(t, POOL["text"]))
        k, n, sub = t[0], self.r.randint(0 if depth == 0 else 1, 3), lambda x: self.lit(x, depth + 1)
        if k == "frozen":
            return self.lit(t[1], depth)
        if k in ("list", "vector"):
            return "[" + ", ".join(sub(t[1]) for _ in range(t[2] if k == "vector" else n)) + "]"
        if k == "set":
            return "{" + ", ".join(sub(t[1]) for _ in range(n)) + "}"
        if k == "map":  # distinct keys: Cassandra resolves duplicate map keys nondeterministically
            return "{" + ", ".join(f"{x}: {sub(t[2])}" for x in dict.fromkeys(sub(t[1]) for _ in range(n))) + "}"
        if k == "tuple":
            return "(" + ", ".join("null" if self.p(0.1) else sub(x) for x in t[1]) + ")"
        fields = self.udts.get(t[1], [("f", "int")])
        return "{" + ", ".join(f"{f}: {sub(ft)}" for f, ft in ([f for f in fields if self.p(0.7)] or fields[:1])) + "}"

    def wrong(self, t=None):
        if self.p(0.4):
            return self.r.choice(BAD)
        return self.lit(self.r.choice(NATIVE + [("list", "int"), ("map", "text", "int"), ("set", "text"), ("tuple", ("int", "text"))]))

    def term(self, t, wrong=0.05, null=0.04):
        """A term of type t (term / simpleTerm): mostly a literal, sometimes a type hint, a cast, arithmetic or a
        conversion function, sometimes null or a value of a wrong type."""
        if self.p(wrong):
            return self.wrong(t)
        if self.p(null):
            return "null"
        b = base_of(t)
        if isinstance(b, str) and self.p(0.07):
            v = self.lit(b)
            forms = [f"({b}) {v}", f"CAST({v} AS {b})", f"blobAs{b.capitalize()}({b}AsBlob({v}))"]
            forms += [f"{v} {self.r.choice('+-*/%')} {self.lit(b)}", f"fromJson('{v}')"] if b in NUMERIC else []
            return self.r.choice(forms)
        return self.lit(t)

    @staticmethod
    def json_of(b, v):
        """The JSON form of a native literal, with quotes doubled for a CQL string."""
        v = v[1:-1].replace("''", "'") if v.startswith("'") else v[2:-2] if v.startswith("$$") else v
        return v if b in NUMERIC and v not in ("NaN", "Infinity", "-Infinity") else v.lower() if b == "boolean" else \
            json.dumps(v).replace("'", "''")

    # -- schema access
    def table(self, scratch_p=0.12):
        scratch = [t for t in self.tables if t.startswith("s_")]
        if scratch and self.p(scratch_p):
            return self.tables[self.r.choice(scratch)]
        return self.tables[self.r.choice([t for t in self.tables if t.startswith("t_")])]

    def tname(self, T):
        if self.p(0.06):
            return f"{self.ks}.{T.name}"
        return self.choice("nosuch", "nosuch_ks.t_all", "system.nosuch", f'"{T.name.upper()}"') if self.p(0.01) else T.name

    # -- SELECT
    def fn_selector(self, c, t):
        b = base_of(t)
        if isinstance(b, str):
            fam = "num" if b in NUMERIC else b if b in self.FUNCS else "text" if b in ("text", "ascii") else "any"
        else:
            fam = "map" if b[0] == "map" else "coll" if b[0] in ("list", "set") else "any"
        fam = self.r.choice(list(self.FUNCS)) if self.p(0.12) else fam
        f, args = self.r.choice(self.FUNCS[fam].split()), c
        f = f"{b if isinstance(b, str) else 'int'}AsBlob" if f == "typeAsBlob" else f
        if f == "round" and self.p(0.5):
            args += ", " + self.choice("1", "2", "-1")
        if fam == "text" and self.p(0.3):
            f, args = self.choice(("mask_inner", f"{c}, 1, 1"), ("mask_outer", f"{c}, 1, 2, '#'"), ("mask_replace", f"{c}, '*'"),
                                  ("mask_inner", f"{c}, -1, 1"), ("mask_hash", f"{c}, 'SHA-256'"))
        return f"{f}({self.fn_selector(c, t)})" if self.p(0.1) else f"{f}({args})"

    def selector(self, T):
        """One selector (selector production): column, function, cast, arithmetic, subscript / field,
        writetime / ttl, literal, token, aggregate, or something invalid; sometimes aliased."""
        r, (c, t) = self.r, self.r.choice(list(T.cols.items()))
        b, dirty = base_of(t), self.dirty[T.name]
        num = [k for k, v in T.cols.items() if base_of(v) in NUMERIC] or [c]
        a, op, e = r.choice(num), r.choice("+-*/%"), lambda: self.lit(b[1])
        s = self.weighted(
            (0.33, lambda: c), (0.17, lambda: self.fn_selector(c, t)),
            (0.07, lambda: f"CAST({c} AS {r.choice(NATIVE + ['varchar', 'counter'])})"),
            (0.08, lambda: self.choice(f"{a} {op} {self.lit(self.choice('int', 'bigint', 'double', 'decimal'))}", f"-{a}",
                                       f"{a} {op} {r.choice(num)}", f"{a} / 0", f"{c} + {self.lit('int')}", f"({a} + 1) * 2")),
            (0.08 * is_a(t, ("map", "set")), lambda: self.choice(f"{c}[{e()}]", f"{c}[{e()}..{e()}]", f"{c}[{e()}..]", f"{c}[..{e()}]")),
            (0.05 * is_a(t, ("udt",)), lambda: f"{c}.{r.choice([f for f, _ in self.udts.get(b[1], [])] + ['nofield'])}"),
            (0.02 * is_a(t, ("list", "tuple")), lambda: self.choice(f"{c}[0]", f"{c}.x", f"{c}[1..2]")),
            (0.06 * ("wt" not in dirty), lambda: r.choice(["writetime", "writetime", "maxwritetime"] + ["ttl"] * ("ttl" not in dirty))
             + f"({r.choice(T.regular() or [c]) if self.p(0.85) else c})"),
            (0.05, lambda: self.choice(self.lit(r.choice(NATIVE)), "null", f"({r.choice(NATIVE)}) {self.lit('int')}", "[1, 2]",
                                       "{1: 'a'}", "(1, 'a')", self.lit("text"))),
            (0.04, lambda: f"token({', '.join(T.pk)})" if self.p(0.8) else f"token({c})"),
            (0.05, lambda: self.choice("count(*)", "COUNT(*)", f"count({c})", f"max({c})", f"min({c})", f"sum({c})", f"avg({c})")),
            (0.07, lambda: self.choice("nope", f"nosuchfn({c})", f"{c}.{c}", f"system.abs({c})", f'"{c.upper()}"', f'"{c}"',
                                       f"{c}({c})", f"cast({c} as nosuchtype)", "*", f"toJson({c}, {c})")))
        return s + " AS " + self.choice("x", "alias1", '"Quoted"', "ttl", "key", "select", c) if self.p(0.15) else s

    def relation(self, c, t, structured=True):
        """A single-column relation on c (relation production); structured ones use the usual operators."""
        b, n = base_of(t), self.r.randint(0 if self.p(0.1) else 1, 3)
        if structured and is_a(t) and t[0] != "frozen":
            if b[0] == "map" and self.p(0.5):
                return self.choice(f"{c} CONTAINS KEY {self.term(b[1])}", f"{c}[{self.term(b[1])}] = {self.term(b[2])}")
            return f"{c} CONTAINS {self.term(element_type(b))}"
        op = self.r.choice(["=", "=", "<", ">", "<=", ">=", "IN"] if structured else
                           "= < > <= >= != IN CONTAINS CONTAINS_KEY LIKE IS_NOT_NULL NOT_IN BETWEEN [k]".split())
        return {"IN": lambda: f"{c} IN ({', '.join(self.term(t) for _ in range(n))})",
                "NOT_IN": lambda: f"{c} NOT IN ({', '.join(self.term(t) for _ in range(n))})",
                "IS_NOT_NULL": lambda: f"{c} IS NOT NULL", "BETWEEN": lambda: f"{c} BETWEEN {self.term(t)} AND {self.term(t)}",
                "LIKE": lambda: f"{c} LIKE " + self.choice("'a%'", "'%b'", "'x'", "1"),
                "[k]": lambda: f"{c}[{self.term('text')}] = {self.term('int')}",
                "CONTAINS": lambda: f"{c} CONTAINS {self.term(element_type(b))}",
                "CONTAINS_KEY": lambda: f"{c} CONTAINS KEY {self.term(b if isinstance(b, str) else b[1])}",
                }.get(op, lambda: f"{c} {op} {self.term(t)}")()

    def where(self, T, mode="select"):
        """(relations, single_partition, needs_filtering). Mostly structured restrictions on the primary key
        (EQ / IN / token ranges on the partition key, an EQ prefix then a slice / IN / multi-column relation on
        the clustering columns) plus optional filters; 25% random relations on any columns."""
        r, rel, single, filt = self.r, [], False, False
        if self.p(0.25):
            cols = list(T.cols.items()) + [("nope", "int")]
            rel = [self.relation(*r.choice(cols), structured=self.p(0.4)) for _ in range(r.randint(1, 3))]
            rel += [f"token({', '.join(T.pk)}) > {self.lit('bigint')}"] if self.p(0.1) else []
            rel += [f"({', '.join(T.ck or T.pk)}) = ({', '.join(self.lit(T.cols[k]) for k in T.ck or T.pk)})"] if self.p(0.05) else []
            return [f"({rel[0]})" if self.p(0.05) else rel[0]] + rel[1:], False, True
        x = r.random()
        pk_full = x < 0.62 or mode != "select"
        if pk_full:
            rel = [f"{k} = {self.term(T.cols[k], 0.02, 0.01)}" for k in T.pk]
            if self.p(0.12):
                rel[-1] = f"{T.pk[-1]} IN ({', '.join(self.term(T.cols[T.pk[-1]], 0.02) for _ in range(r.randint(1, 3)))})"
            single = " IN " not in rel[-1]
        elif x < 0.75:
            bound = self.choice("0", "-9223372036854775808", "3000000000000000000", "token(1)", "-4611686018427387904")
            rel.append(f"token({', '.join(T.pk)}) {self.choice('>', '>=', '<', '<=')} {bound}")
        elif x < 0.85 and len(T.pk) > 1:
            rel.append(f"{T.pk[0]} = {self.term(T.cols[T.pk[0]])}")
            filt = True
        if T.ck and (pk_full or self.p(0.3)):
            n = r.randint(0, len(T.ck)) if mode != "update" else len(T.ck)
            rel += [f"{k} = {self.term(T.cols[k], 0.02, 0.01)}" for k in T.ck[:n]]
            if n < len(T.ck) and mode in ("select", "delete") and self.p(0.6):
                k, t, y = T.ck[n], T.cols[T.ck[n]], r.random()
                if y < 0.45:
                    rel.append(f"{k} {self.choice('>', '>=', '<', '<=')} {self.term(t)}")
                    rel += [f"{k} {self.choice('<', '<=')} {self.term(t)}"] if self.p(0.4) else []
                elif y < 0.65:
                    rel.append(f"{k} IN ({', '.join(self.term(t) for _ in range(r.randint(1, 3)))})")
                else:  # multi-column relation (tupleOfIdentifiers)
                    ks = T.ck[n:n + r.randint(1, len(T.ck) - n)]
                    tup = lambda: "(" + ", ".join(self.term(T.cols[q], 0.02, 0) for q in ks) + ")"
                    op = self.choice("=", ">", ">=", "<", "<=", "IN")
                    rel.append(f"({', '.join(ks)}) {op} " + (f"({tup()}, {tup()})" if op == "IN" else tup()))
            elif n < len(T.ck) - 1 and self.p(0.15):  # skips a clustering column: needs filtering
                rel.append(f"{T.ck[n + 1]} = {self.term(T.cols[T.ck[n + 1]])}")
                filt = True
        if mode == "select" and self.p(0.3) and T.regular():
            c = r.choice(T.regular())
            rel.append(self.relation(c, T.cols[c]))
            filt = True
        return rel, single, filt or not pk_full

    def select(self):
        r, T = self.r, self.table()
        distinct = "DISTINCT " if self.p(0.07) else ""
        if distinct:  # partition key and static columns (valid), sometimes another column
            sels = T.pk + ([r.choice(T.static)] if T.static and self.p(0.5) else []) + ([r.choice(list(T.cols))] if self.p(0.3) else [])
        else:
            sels = ["*"] if self.p(0.2) else [self.selector(T) for _ in range(r.randint(1, 4))]
        json_ = "JSON " if self.p(0.06) else ""
        rel, ordered, filt = self.where(T)
        head, tail = f"SELECT {json_}{distinct}{', '.join(sels)}", (" WHERE " + " AND ".join(rel)) if rel else ""
        if self.p(0.12):  # GROUP BY a primary key prefix (valid) or random columns
            keys = T.pk + T.ck
            g = keys[:r.randint(1, len(keys))] if self.p(0.75) else r.sample(list(T.cols), min(2, len(T.cols)))
            tail += " GROUP BY " + ", ".join(g)
            if sels == ["*"] or self.p(0.5):
                head = f"SELECT {json_}{', '.join(g[:2])}, {self.selector(T)}, count(*)"
        if T.ck and self.p(0.2):  # ORDER BY: declared order or its reverse on a clustering prefix, or random
            flip = self.p(0.5)
            ob = [f"{k} {'DESC' if (k in T.ck_desc) != flip else 'ASC'}" if self.p(0.9) else f"{k} {self.choice('ASC', 'DESC')}"
                  for k in T.ck[:r.randint(1, len(T.ck))]]
            tail += " ORDER BY " + ", ".join(ob if self.p(0.8) else [f"{r.choice(list(T.cols))} {self.choice('ASC', 'DESC', '')}".strip()])
            ordered = True
        if self.p(0.08):
            tail += " PER PARTITION LIMIT " + (self.choice("1", "2", "0", "-1", "?") if self.p(0.2) else self.choice("1", "2"))
        if self.p(0.2):
            tail += " LIMIT " + (self.choice("1", "2", "3", "5", "100") if self.p(0.85) else self.choice("0", "-1", "2147483648", "1.5"))
        if (filt and self.p(0.8)) or self.p(0.1):
            tail += " ALLOW FILTERING"
        return Stmt(f"{head} FROM {self.tname(T)}{tail}", "select", {T.name}, ordered)

    # -- writes (the determinism flags are derived from the executed text, in Fuzzer.mark_dirty)
    def using(self, T, lwt=False):
        """A USING clause: mostly a fixed timestamp, sometimes a TTL (long enough not to expire during a run)."""
        parts = []
        if self.p(0.8) if not (lwt or T.counter) else self.p(0.08):
            parts.append("TIMESTAMP " + (self.choice("1000", "2000", "5000", "1500", "1000000") if self.p(0.95)
                                         else self.choice("-1", "9223372036854775807", "?")))
        if self.p(0.08):
            parts.append("TTL " + (self.choice("86400", "100000", "0") if self.p(0.7) else self.choice("-1", "630720001", "2147483647")))
        self.r.shuffle(parts)
        return (" USING " + " AND ".join(parts)) if parts else ""

    def condition(self, T):
        """IF EXISTS / IF NOT EXISTS / IF <columnCondition> AND ..."""
        if self.p(0.3):
            return self.choice(" IF EXISTS", " IF EXISTS", " IF NOT EXISTS")
        conds = []
        for c in (self.r.choice(T.regular() or list(T.cols)) for _ in range(self.r.randint(1, 2))):
            t = T.cols[c]
            b = base_of(t)
            if is_a(t, ("map",)) and self.p(0.4):
                conds.append(f"{c}[{self.term(b[1])}] {self.choice('=', '!=', '>')} {self.term(b[2])}")
            elif is_a(t, ("udt",)) and self.p(0.5):
                f, ft = self.r.choice(self.udts.get(b[1], [("f", "int")]))
                conds.append(f"{c}.{f} = {self.term(ft)}")
            else:
                conds.append(self.weighted((0.15, lambda: f"{c} IN ({self.term(t)}, {self.term(t)})"),
                                           (0.1, lambda: f"{c} CONTAINS {self.term(b if isinstance(b, str) else b[-1])}"),
                                           (0.75, lambda: f"{c} {self.choice('=', '=', '!=', '<', '>=')} {self.term(t, null=0.15)}")))
        return " IF " + " AND ".join(conds)

    def insert(self, T=None):
        r, T = self.r, T or self.table()
        keys = T.pk + T.ck
        cols = [k for k in keys if self.p(0.97)] + [k for k in T.regular() if self.p(0.5)] or list(T.cols)[:1]
        lwt = self.p(0.08)
        tail = (" IF NOT EXISTS" if lwt else "") + self.using(T, lwt)
        if self.p(0.08):  # INSERT JSON (jsonInsertStatement)
            obj = ", ".join(f'"{k}": {self.json_of(base_of(T.cols[k]), self.lit(base_of(T.cols[k])))}'
                            for k in cols if isinstance(base_of(T.cols[k]), str))
            dflt = self.choice("", "", " DEFAULT UNSET", " DEFAULT NULL")
            return Stmt(f"INSERT INTO {self.tname(T)} JSON '{{{obj}}}'{dflt}{tail}", "write", {T.name})
        cols += [r.choice(cols) if self.p(0.5) else "nope"] if self.p(0.05) else []
        vals = [self.term(T.cols.get(c, "int"), 0.02 if c in keys else 0.04, 0.01 if c in keys else 0.06) for c in cols]
        if self.p(0.03):
            vals = vals[:-1] if len(vals) > 1 else vals + ["1"]
        return Stmt(f"INSERT INTO {self.tname(T)} ({', '.join(cols)}) VALUES ({', '.join(vals)}){tail}", "write", {T.name})

    def set_op(self, c, t):
        """One columnOperation: assignment, collection / counter arithmetic, element or field setting."""
        b, L = base_of(t), lambda: self.lit(base_of(t))
        if t == "counter":
            return self.choice(f"{c} = {c} + {self.lit('int')}", f"{c} = {c} - {self.lit('int')}", f"{c} += 2", f"{c} -= 1",
                               f"{c} = 5", f"{c} = {c} + 1.5", f"{c} = {c} - -3")
        if isinstance(b, str) or t[0] == "frozen" or self.p(0.3):
            return f"{c} = {c} + {self.lit(b if isinstance(b, str) else 'int')}" if self.p(0.04) else f"{c} = {self.term(t)}"
        if b[0] == "list":
            return self.choice(f"{c} = {c} + {L()}", f"{c} = {L()} + {c}", f"{c} = {c} - {L()}", f"{c} += {L()}",
                               f"{c}[{self.choice('0', '1', '5', '-1')}] = {self.term(b[1])}")
        if b[0] == "set":
            return self.choice(f"{c} = {c} + {L()}", f"{c} = {c} - {L()}", f"{c} -= {L()}", f"{c} = {L()} + {c}")
        if b[0] == "map":
            return self.choice(f"{c} = {c} + {L()}", f"{c}[{self.term(b[1])}] = {self.term(b[2])}", f"{c} += {L()}",
                               f"{c} = {c} - {{{self.lit(b[1])}}}", f"{c} = {c} - {self.lit(b[1])}")
        if b[0] == "udt":
            f, ft = self.r.choice(self.udts.get(b[1], [("f", "int")]) + [("nofield", "int")])
            return f"{c}.{f} = {self.term(ft)}"
        return f"{c} = {self.term(t)}"

    def update(self, T=None):
        r, T = self.r, T or self.table()
        static_only = T.static and self.p(0.2)
        pool = list(T.cols) if self.p(0.03) else T.static if static_only else (T.regular() or list(T.cols))
        ops = [self.set_op(c, T.cols[c]) for c in r.sample(pool, r.randint(1, min(3, len(pool))))]
        rel = [x for x in self.where(T, "update")[0] if not static_only or x.split()[0] not in T.ck]
        lwt = self.p(0.1)
        return Stmt(f"UPDATE {self.tname(T)}{self.using(T, lwt)} SET {', '.join(ops)} WHERE {' AND '.join(rel) or 'nope = 1'}"
                    f"{self.condition(T) if lwt else ''}", "write", {T.name})

    def delete(self, T=None):
        r, T = self.r, T or self.table()
        sel = []
        for c in (r.sample(list(T.cols), r.randint(1, min(2, len(T.cols)))) if self.p(0.5) else []):
            b = base_of(T.cols[c])
            if is_a(b) and self.p(0.6):
                sel.append(f"{c}[{self.term(b[1] if b[0] != 'list' else 'int')}]")
            elif is_a(b, ("udt",)) and self.p(0.6):
                sel.append(f"{c}.{r.choice(self.udts.get(b[1], [('f', 'int')]))[0]}")
            else:
                sel.append(c)
        rel, lwt = self.where(T, "delete")[0], self.p(0.08)
        using = f" USING TIMESTAMP {self.choice('1000', '1500', '3000', '999')}" if not lwt and self.p(0.75) else ""
        return Stmt(f"DELETE {', '.join(sel)}{' ' if sel else ''}FROM {self.tname(T)}{using} WHERE {' AND '.join(rel) or 'nope = 1'}"
                    f"{self.condition(T) if lwt else ''}", "write", {T.name})

    def batch(self):
        cnt, parts, tables = self.p(0.3) and "t_cnt" in self.tables, [], set()
        for _ in range(self.r.randint(1, 4)):
            T = self.tables["t_cnt"] if cnt and self.p(0.9) else self.table(0.05)
            s = self.choice(self.insert, self.update, self.update, self.delete)(T)
            parts.append(s.cql)
            tables |= s.tables
        kind = "COUNTER " if cnt and self.p(0.85) else self.choice("", "", "UNLOGGED ", "COUNTER ")
        using = f" USING TIMESTAMP {self.choice('4000', '1000')}" if self.p(0.2) else ""
        parts += [self.select().cql] if self.p(0.03) else []
        return Stmt(f"BEGIN {kind}BATCH{using} " + "; ".join(parts) + "; APPLY BATCH", "write", tables)

    # -- DDL: scratch tables / types / indexes / keyspace, sometimes base objects (which are then rebuilt)
    def create_table(self):
        r, name = self.r, self.r.choice(self.S_TABLES) if self.p(0.95) else "t_all"
        names = ["k"] + [f"c{i}" for i in range(r.randint(1, 5))]
        names += [r.choice(names)] if self.p(0.04) else []
        cols = [f"{a} {r.choice(self.KEY_TYPES if i < 3 and self.p(0.9) else self.TYPES_DDL)}" for i, a in enumerate(names)]
        y, ck = r.random(), []
        if y < 0.35:
            cols[0] += " PRIMARY KEY"
        elif y < 0.85:
            nk = r.randint(1, min(2, len(names)))
            pk, ck = names[:nk], names[nk:nk + r.randint(0, 2)]
            cols.append(f"PRIMARY KEY ({'(' + ', '.join(pk) + ')' if nk > 1 or self.p(0.2) else pk[0]}{''.join(', ' + c for c in ck)})")
        elif y < 0.93:
            cols.append(self.choice("PRIMARY KEY (nope)", "PRIMARY KEY ()", "PRIMARY KEY (k, k)", f"PRIMARY KEY ({names[-1]}, k)"))
        if self.p(0.12):
            cols[r.randrange(1, len(names))] += " STATIC"
        opts = [r.choice(self.TABLE_OPTS) for _ in range(r.randint(0, 2))]
        if ck and self.p(0.3) or self.p(0.03):
            opts.append(f"CLUSTERING ORDER BY ({r.choice(ck or names)} {self.choice('DESC', 'ASC')})")
        ine = " IF NOT EXISTS" if self.p(0.2) else ""
        return Stmt(f"CREATE TABLE{ine} {name} ({', '.join(cols)})" + (" WITH " + " AND ".join(opts) if opts else ""), "ddl", {name})

    def alter_table(self):
        r, scratch = self.r, [t for t in self.tables if t.startswith("s_")]
        name = r.choice(scratch) if scratch and self.p(0.7) else r.choice(list(self.tables) + ["nosuch"])
        cols = list(self.tables[name].cols) if name in self.tables else ["k"]
        c, ty, ie = r.choice(cols), lambda: r.choice(self.TYPES_DDL), lambda: self.choice("", " IF EXISTS")
        op = self.weighted(
            (0.25, lambda: f"ADD{' IF NOT EXISTS' if self.p(0.1) else ''} {self.choice('n1', 'n2', 'k', 'v9')} {ty()}"
                           f"{' STATIC' if self.p(0.1) else ''}"),
            (0.05, lambda: f"ADD (n1 {ty()}, n2 {ty()})"),
            (0.2, lambda: f"DROP{ie()} {r.choice(cols + ['nope'])}" + (" USING TIMESTAMP 1" if self.p(0.1) else "")),
            (0.15, lambda: f"RENAME{ie()} {c} TO {self.choice('k2', 'r1', cols[-1])}"), (0.07, lambda: f"ALTER {c} TYPE {ty()}"),
            (0.06, lambda: self.choice(f"ALTER {c} MASKED WITH mask_default()", f"ALTER {c} DROP MASKED", "DROP COMPACT STORAGE")),
            (0.22, lambda: "WITH " + " AND ".join(r.choice(self.TABLE_OPTS) for _ in range(r.randint(1, 2)))))
        return Stmt(f"ALTER TABLE{' IF EXISTS' if self.p(0.1) else ''} {name} {op}", "ddl", {name})

    def type_ddl(self):
        r, ty = self.r, lambda: self.r.choice(self.TYPES_DDL)
        name = r.choice(self.S_TYPES) if self.p(0.9) else self.choice("addr", "byte", "int", "s_t0")
        fields = ", ".join([f"f{i} {ty()}" for i in range(r.randint(1, 3))] + (["f0 int"] if self.p(0.05) else []))
        return Stmt(self.weighted(
            (0.4, lambda: f"CREATE TYPE{self.choice('', ' IF NOT EXISTS')} {name} ({fields})"),
            (0.35, lambda: f"ALTER TYPE {name} " + self.choice(f"ADD g{r.randint(0, 2)} {ty()}", "RENAME f0 TO h0",
                                                               f"RENAME IF EXISTS f{r.randint(0, 2)} TO f{r.randint(0, 2)}",
                                                               f"ALTER f0 TYPE {ty()}", f"ADD IF NOT EXISTS f1 {ty()}")),
            (0.25, lambda: f"DROP TYPE{self.choice('', ' IF EXISTS')} {name}")), "ddl")

    def index_ddl(self):
        r = self.r
        if self.p(0.3):
            return Stmt(f"DROP INDEX{self.choice('', ' IF EXISTS')} {r.choice(self.S_IDX + ['nope', self.ks + '.s_ix0'])}", "ddl")
        T = self.table(0.3)
        c, t = r.choice(list(T.cols.items()))
        tgt = self.choice(c, f"keys({c})", f"values({c})", f"entries({c})", f"full({c})") if is_a(t) else \
            self.choice("nope", f"keys({c})", f"{c}, {c}", "") if self.p(0.05) else c
        # (no SASI: Sibyl answers as Cassandra with its default sasi_indexes_enabled: false, and the oracle runs
        # with it enabled, so every SASI index would be a divergence and so would every query it then serves)
        using = self.choice("", "", "", " USING 'StorageAttachedIndex'", " USING 'sai'", " USING 'NoSuchIndex'")
        opts = self.choice("", "", " WITH OPTIONS = {'case_sensitive': 'false'}", " WITH OPTIONS = {'mode': 'CONTAINS'}",
                           " WITH OPTIONS = {'bogus': '1'}")
        custom, name = "CUSTOM " if using and self.p(0.9) else "", r.choice(self.S_IDX) if self.p(0.9) else ""
        ine = " IF NOT EXISTS" if self.p(0.15) else ""
        return Stmt(f"CREATE {custom}INDEX{ine} {name} ON {T.name} ({tgt}){using}{opts}", "ddl", {T.name})

    def other_ddl(self):
        ksx, rep, t = self.ks + "_x", self.r.choice(self.REPLICATION), self.table(0.2).name
        dw = self.choice("", "", " AND durable_writes = true", " AND durable_writes = 'maybe'", " AND bogus = 1")
        return self.weighted(
            (0.35, lambda: Stmt(f"CREATE KEYSPACE{self.choice('', ' IF NOT EXISTS')} {ksx} WITH replication = {rep}{dw}", "ddl")),
            (0.15, lambda: Stmt(f"ALTER KEYSPACE{self.choice('', ' IF EXISTS')} {ksx} WITH replication = {rep}", "ddl")),
            (0.15, lambda: Stmt(f"DROP KEYSPACE{self.choice('', ' IF EXISTS')} {ksx}", "ddl")),
            (0.1, lambda: Stmt(f"TRUNCATE {self.choice('', 'TABLE ')}{t}", "write", {t})),
            (0.25, lambda: Stmt(self.choice(
                "CREATE MATERIALIZED VIEW s_mv AS SELECT * FROM t_clu WHERE p1 IS NOT NULL AND p2 IS NOT NULL AND c1 IS NOT NULL "
                "AND c2 IS NOT NULL AND c3 IS NOT NULL PRIMARY KEY ((p1, p2), c3, c1, c2)",
                "CREATE FUNCTION s_f (a int) RETURNS NULL ON NULL INPUT RETURNS int LANGUAGE java AS 'return a;'",
                "CREATE AGGREGATE s_ag (int) SFUNC nosuch STYPE int", "DROP FUNCTION IF EXISTS s_f", f"USE {self.ks}",
                "USE nosuch_ks", "CREATE TRIGGER s_tr ON t_all USING 'org.NoSuch'", "DROP MATERIALIZED VIEW IF EXISTS s_mv"), "ddl")))

    def ddl(self):
        name = self.r.choice([t for t in self.tables if t.startswith("s_")] + self.S_TABLES)
        drop = lambda: Stmt(f"DROP TABLE{self.choice('', ' IF EXISTS')} {name}", "ddl", {name})
        return self.weighted((0.22, self.create_table), (0.23, self.alter_table), (0.1, drop), (0.13, self.type_ddl),
                             (0.2, self.index_ddl), (0.12, self.other_ddl))

    def mutate(self, st):
        """A token-level mutation (the invalid side): drop, duplicate, swap or insert a token, cut the statement
        short, or replace a literal / identifier by another literal / keyword / column."""
        r, toks = self.r, self.TOKEN_RE.findall(st.cql)
        if len(toks) < 3:
            return st
        i, op = r.randrange(len(toks) - 1), r.randrange(7)
        lits = [j for j, t in enumerate(toks) if re.match(r"['$\d-]|0x|true|false|NaN|Infinity", t)] or [i]
        if op == 0:
            del toks[i]
        elif op == 1:
            toks.insert(i, toks[i])
        elif op == 2:
            toks[i], toks[i + 1] = toks[i + 1], toks[i]
        elif op == 3:
            toks = toks[:max(1, i)]
        elif op == 4:
            toks[r.choice(lits)] = self.wrong() if self.p(0.5) else self.lit(r.choice(NATIVE))
        elif op == 5:
            toks[i] = r.choice(self.KEYWORDS + list(r.choice(list(self.tables.values())).cols) + ["nope", "t_all"])
        else:
            toks.insert(i, r.choice(list("(),;.=<>[]{}:*+-?") + ["..", "'", '"']))
        return Stmt(" ".join(toks), st.kind, st.tables, st.ordered)

    def statement(self):
        st = self.weighted((0.45, self.select), (0.14, self.insert), (0.14, self.update), (0.08, self.delete),
                           (0.05, self.batch), (0.14, self.ddl))
        return self.mutate(st) if self.p(0.12) else st


# ----------------------------------------------------------------------------------------------- servers
class Gone(Exception):
    pass


class Server:
    """One connection to one node, reconnecting when the node went away."""

    def __init__(self, name, addr, timeout, ks):
        host, _, port = addr.rpartition(":")
        self.name, self.host, self.port, self.timeout, self.ks = name, host, int(port), timeout, ks
        self.cluster = self.session = None
        self.use_ks = False

    def connect(self):
        prof = ExecutionProfile(load_balancing_policy=WhiteListRoundRobinPolicy([self.host]), request_timeout=self.timeout)
        self.cluster = Cluster([self.host], port=self.port, protocol_version=5, connect_timeout=5,
                               control_connection_timeout=5, execution_profiles={EXEC_PROFILE_DEFAULT: prof})
        self.session = self.cluster.connect(self.ks if self.use_ks else None)

    def reconnect(self, wait=120):
        deadline = time.time() + wait
        while time.time() < deadline:
            try:
                self.cluster and self.cluster.shutdown()
                self.connect()
                return True
            except Exception:
                time.sleep(2)
        return False

    def alive(self):
        try:
            return self.session.execute("SELECT release_version FROM system.local", timeout=5) is not None
        except Exception:
            return False

    def submit(self, cql):
        try:
            return self.session.execute_async(SimpleStatement(cql, fetch_size=500))
        except Exception as e:
            return e

    def collect(self, fut):
        """('ok', column names, rendered rows) | ('err' | 'timeout' | 'conn', class name, message)."""
        try:
            if isinstance(fut, Exception):
                raise fut
            rs, rows = fut.result(), []
            for row in rs:
                rows.append(tuple(render(v) for v in row))
                if len(rows) >= 3000:
                    break
            return ("ok", tuple(rs.column_names or ()), tuple(rows))
        except Exception as e:
            errs = getattr(e, "errors", None) or {}
            if type(e).__name__ == "NoHostAvailable" and errs and "code=" in str(next(iter(errs.values()))):
                e = next(iter(errs.values()))  # a server error the driver wrapped (e.g. code=0000 Server error)
            cls, msg = type(e).__name__, str(e)
            m = re.match(r'<?Error from server: code=\w+ \[.*?\] message="(.*)">?$', msg, re.S)
            msg = normalize(m.group(1) if m else msg)
            if cls in ("OperationTimedOut", "ReadTimeout", "WriteTimeout"):
                return ("timeout", cls, msg)
            return ("conn" if cls in ("NoHostAvailable", "ConnectionShutdown", "ConnectionException", "ConnectionBusy") else "err", cls, msg)


def render(v):
    """A canonical string for a driver value (sets sorted; UDTs by field)."""
    if isinstance(v, (set, frozenset)) or type(v).__name__ == "SortedSet":
        return "{" + ", ".join(sorted(render(x) for x in v)) + "}"
    if isinstance(v, dict) or type(v).__name__ == "OrderedMapSerializedKey":
        return "{" + ", ".join(f"{render(k)}: {render(x)}" for k, x in v.items()) + "}"
    if hasattr(v, "_fields"):
        return "{" + ", ".join(f"{f}: {render(getattr(v, f))}" for f in v._fields) + "}"
    if isinstance(v, (list, tuple)):
        return ("[%s]" if isinstance(v, list) else "(%s)") % ", ".join(render(x) for x in v)
    return repr(v)


def normalize(msg):
    """Cassandra lists a function's type signatures in hash order, which changes between JVM runs: sort them
    (the known signatures of a call none matches, and the ones an ambiguous call matches)."""
    for marker, end in (("(known type signatures: ", ")"), ("(can be matched by following signatures: ", "): use")):
        i = msg.find(marker)
        j = msg.rfind(end)
        if i >= 0 and j > i:
            msg = msg[:i + len(marker)] + ", ".join(sorted(msg[i + len(marker):j].split(", "))) + msg[j:]
    return msg


def template(msg, ks):
    """A message with its literals replaced by placeholders, so that messages group into categories."""
    s = msg.replace(ks, "<ks>")
    m = re.match(r"line \d+:-?\d+ (.*?)( \(.*)?$", s, re.S)  # syntax errors: drop the position and the echo
    s = "line <pos> " + m.group(1) if m else s
    # quoted literals become '<s>', except the punctuation and keywords of syntax errors
    s = re.sub(r"'(?:[^']|'')*'", lambda m: m.group(0) if re.fullmatch(r"'([^\w\s']{1,3}|[A-Z_]+)'", m.group(0)) else "'<s>'", s)
    s = re.sub(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}\b", "<uuid>", s)
    s = re.sub(r"0x[0-9a-fA-F]*", "<hex>", s)
    s = re.sub(r"(?<![\w.])-?\d+(\.\d+)?([eE][+-]?\d+)?(?!\w)", "<n>", s)
    return re.sub(r"\bs_(t|ty|ix)\d\b", r"s_\1N", s)[:220]


# --------------------------------------------------------------------------------- base schema and data
BASE_DDL = [
    "CREATE TYPE addr (street text, num int, tags frozen<set<text>>)",
    "CREATE TABLE t_all (pk int PRIMARY KEY, a_int int, a_bigint bigint, a_text text, a_ascii ascii, a_varint varint, "
    "a_decimal decimal, a_double double, a_float float, a_bool boolean, a_blob blob, a_uuid uuid, a_tuuid timeuuid, "
    "a_ts timestamp, a_date date, a_time time, a_dur duration, a_inet inet, a_tiny tinyint, a_small smallint)",
    "CREATE TABLE t_coll (pk int PRIMARY KEY, l list<int>, s set<text>, m map<text, int>, fl frozen<list<text>>, "
    "fs frozen<set<int>>, fm frozen<map<int, text>>, u addr, fu frozen<addr>, tup tuple<int, text>, lu list<frozen<addr>>)",
    "CREATE TABLE t_clu (p1 int, p2 text, c1 int, c2 text, c3 bigint, v int, w text, d double, st int static, "
    "PRIMARY KEY ((p1, p2), c1, c2, c3)) WITH CLUSTERING ORDER BY (c1 ASC, c2 DESC, c3 ASC)",
    "CREATE TABLE t_cnt (pk int, ck int, c1 counter, c2 counter, PRIMARY KEY (pk, ck))",
    "CREATE TABLE t_frz (pk text, ck frozen<set<int>>, ck2 timeuuid, v blob, t tuple<int, frozen<list<text>>>, "
    "PRIMARY KEY (pk, ck, ck2)) WITH CLUSTERING ORDER BY (ck DESC, ck2 ASC)"]


def base_data(gen, seed):
    """Deterministic base rows per table, written USING TIMESTAMP 1000 (counters: increments)."""
    g, out = Gen(seed * 7919 + 17, gen.ks), {}
    g.tables, g.udts = gen.tables, gen.udts
    for name, T in gen.tables.items():
        if T.counter:
            out[name] = [f"UPDATE {name} SET c1 = c1 + {3 * pk + ck}, c2 = c2 - {ck} WHERE pk = {pk} AND ck = {ck}"
                         for pk in range(3) for ck in range(3)]
            continue
        out[name] = []
        for pv in sorted({tuple(g.r.choice(POOL[T.cols[k]][:4]) for k in T.pk) for _ in range(12)})[:6 if not T.ck else 4]:
            for _ in range(g.r.randint(2, 5) if T.ck else 1):
                cols = T.pk + T.ck + [k for k in T.regular() if g.p(0.85)]
                vals = list(pv) + [g.lit(T.cols[k]) for k in cols[len(T.pk):]]
                out[name].append(f"INSERT INTO {name} ({', '.join(cols)}) VALUES ({', '.join(vals)}) USING TIMESTAMP 1000")
    return out


# ----------------------------------------------------------------------------------------------- the run
class Fuzzer:
    def __init__(self, a):
        self.a, self.ks = a, f"fuzz_{a.seed}"
        self.gen = Gen(a.seed, self.ks)
        self.sib, self.cass = Server("sibyl", a.sibyl, a.timeout, self.ks), Server("cassandra", a.cassandra, a.timeout, self.ks)
        self.cats, self.stats, self.down = {}, collections.Counter(), set()  # category -> [count, first record]
        os.makedirs(a.out, exist_ok=True)
        self.jsonl = open(os.path.join(a.out, "divergences.jsonl"), "w")
        self.log = open(os.path.join(a.out, "statements.cql"), "w")

    def both(self, cql):
        """Runs cql on both servers concurrently; notes a server that went away."""
        fs = self.sib.submit(cql), self.cass.submit(cql)
        s, c = self.sib.collect(fs[0]), self.cass.collect(fs[1])
        self.down |= {srv for srv, o in ((self.sib, s), (self.cass, c)) if o[0] in ("conn", "timeout") and not srv.alive()}
        return s, c

    def recover(self):
        """Waits for the servers that went away, then re-creates everything (a restart may have lost it)."""
        for srv in self.down:
            self.stats[f"reconnects {srv.name}"] += 1
            print(f"{srv.name} went away at statement {self.stats['statements']}: waiting for it", file=sys.stderr)
            srv.use_ks = False  # a restarted server may have lost the keyspace
            if not srv.reconnect(self.a.reconnect_wait):
                raise Gone(f"{srv.name} has been gone for more than {self.a.reconnect_wait} s")
        self.down = set()
        self.stats["full resets"] += 1
        self.setup()

    def quiet(self, cql, servers=None):
        """Runs a housekeeping statement, ignoring errors."""
        for srv in servers or (self.sib, self.cass):
            try:
                srv.session.execute(cql)
            except Exception as e:
                self.stats["housekeeping errors"] += 1
                if self.a.verbose:
                    print(f"{srv.name}: {cql[:80]}: {e}", file=sys.stderr)

    def refresh_model(self):
        """Reads the tables, columns and UDTs of the keyspace from Cassandra's system_schema."""
        s, tables = self.cass.session, {}
        for r in s.execute("SELECT table_name, column_name, kind, position, type, clustering_order FROM system_schema.columns "
                           "WHERE keyspace_name = %s", [self.ks]):
            T = tables.setdefault(r.table_name, Table(r.table_name))
            T.cols[r.column_name] = parse_type(r.type)
            T.counter |= r.type == "counter"
            if r.kind in ("partition_key", "clustering"):
                (T.pk if r.kind == "partition_key" else T.ck).append((r.position, r.column_name))
                if r.clustering_order == "desc":
                    T.ck_desc.add(r.column_name)
            elif r.kind == "static":
                T.static.append(r.column_name)
        for T in tables.values():
            T.pk, T.ck = [c for _, c in sorted(T.pk)], [c for _, c in sorted(T.ck)]
            self.gen.dirty[T.name] |= ({"wt"} if T.counter else set()) | ({"ttl"} if T.name.startswith("s_") else set())
        self.gen.tables = tables  # (counter cells carry server timestamps; scratch tables may have a default TTL)
        self.gen.udts = {r.type_name: list(zip(r.field_names, map(parse_type, r.field_types))) for r in s.execute(
            "SELECT type_name, field_names, field_types FROM system_schema.types WHERE keyspace_name = %s", [self.ks])}

    def schema_of(self, srv):
        qs = ("SELECT table_name, column_name, kind, position, type, clustering_order FROM system_schema.columns",
              "SELECT table_name, index_name, kind, options FROM system_schema.indexes",
              "SELECT type_name, field_names, field_types FROM system_schema.types")
        return [(lambda o: sorted(o[2]) if o[0] == "ok" else o)(srv.collect(srv.submit(f"{q} WHERE keyspace_name = '{self.ks}'")))
                for q in qs]

    def setup(self):
        """(Re)creates the keyspace, the base schema and the base data on both servers. A base row whose write
        diverges (answer or resulting state) is recorded and left out of the base data."""
        for srv in (self.sib, self.cass):
            srv.use_ks = False
            if not srv.reconnect(30):
                raise Gone(f"cannot connect to {srv.name} at {srv.host}:{srv.port}")
            for q in (f"DROP KEYSPACE IF EXISTS {self.ks}_x", f"DROP KEYSPACE IF EXISTS {self.ks}",
                      f"CREATE KEYSPACE {self.ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"):
                self.quiet(q, [srv])
            srv.use_ks = True
            srv.session.set_keyspace(self.ks)
        for q in BASE_DDL:
            self.quiet(q)
        self.refresh_model()
        self.base_cols, self.base_udt = {n: dict(T.cols) for n, T in self.gen.tables.items()}, self.gen.udts.get("addr")
        self.data = base_data(self.gen, self.a.seed)
        for name, qs in self.data.items():
            self.data[name] = []
            for q in qs:
                s, c = self.both(q)
                cat = self.category(Stmt(q, "write"), s, c)
                if not cat:
                    s, c = self.both(f"SELECT * FROM {name}")
                    cat = self.category(Stmt("", "state"), s, c)
                if cat:
                    self.record("base data: " + cat, q, s, c)
                    self.quiet(f"TRUNCATE {name}")
                    self.fill(name)
                else:
                    self.data[name].append(q)
            self.gen.dirty[name] = {"wt"} if self.gen.tables[name].counter else set()

    def fill(self, name):
        for q in self.data.get(name, []):
            self.quiet(q)
        self.gen.dirty[name] = {"wt"} if self.gen.tables[name].counter else set()

    def resync(self, tables):
        """Truncates and re-fills tables on both servers (after a possible state divergence)."""
        self.stats["resyncs"] += 1
        for t in set(tables) & set(self.gen.tables):
            if t in self.base_cols and self.gen.tables[t].cols != self.base_cols[t]:
                self.rebuild(t)
                continue
            self.quiet(f"TRUNCATE {t}")
            if t in self.data:
                self.fill(t)
            else:
                self.gen.dirty[t] = {"ttl"}

    def rebuild(self, t):
        """Drops and re-creates a base table (after DDL changed it), then re-fills it."""
        self.stats["rebuilds"] += 1
        self.quiet(f"DROP TABLE IF EXISTS {t}")
        self.quiet(next(q for q in BASE_DDL if q.startswith(f"CREATE TABLE {t} ")))
        self.refresh_model()
        self.fill(t)

    def reset_scratch(self):
        self.stats["scratch resets"] += 1
        for q in ([f"DROP TABLE IF EXISTS {t}" for t in set(self.gen.tables) | set(self.gen.S_TABLES) if t.startswith("s_")] +
                  [f"DROP INDEX IF EXISTS {i}" for i in self.gen.S_IDX] + [f"DROP TYPE IF EXISTS {t}" for t in self.gen.S_TYPES] +
                  [f"DROP KEYSPACE IF EXISTS {self.ks}_x"]):
            self.quiet(q)

    def wait_index_builds(self):
        """Cassandra builds a new index in the background and fails reads until it is done."""
        names = lambda q: {r.index_name for r in self.cass.session.execute(q, [self.ks])}
        for _ in range(50):
            try:
                if names("SELECT index_name FROM system_schema.indexes WHERE keyspace_name = %s") <= \
                        names('SELECT index_name FROM system."IndexInfo" WHERE table_name = %s'):
                    return
            except Exception:
                return
            time.sleep(0.2)

    # -- comparison
    @staticmethod
    def row_diff(c, s, ordered):
        """None if the results are equal, else a short description of the difference."""
        if c[1] != s[1]:
            return "column names"
        if (c[2] == s[2]) if ordered else (sorted(c[2]) == sorted(s[2])):
            return None
        if sorted(c[2]) == sorted(s[2]) or len(c[2]) != len(s[2]):
            return "row order" if len(c[2]) == len(s[2]) else "row count"
        for x, y in zip(*((c[2], s[2]) if ordered else (sorted(c[2]), sorted(s[2])))):
            for name, u, v in zip(c[1], x, y):
                if u != v:
                    return f"values of {name}"
        return "values"

    def category(self, st, s, c):
        """None when the two answers agree, else the category key of the divergence."""
        tm = lambda m: template(m, self.ks)
        for o, who in ((s, "sibyl"), (c, "cassandra")):
            if o[0] in ("timeout", "conn") and not (s[0] == c[0] and s[1] == c[1]):
                return f"{'timeout' if o[0] == 'timeout' else 'connection lost'} on {who}: {o[1]}"
        if s[0] == "ok" and c[0] == "ok":
            d = self.row_diff(c, s, st.ordered)
            return None if d is None else f"different rows ({st.kind}): {tm(d)}"
        if s[0] == "ok" or c[0] == "ok":
            o, who = (c, "sibyl accepts / cassandra rejects") if s[0] == "ok" else (s, "cassandra accepts / sibyl rejects")
            return f"{who}: {o[1]}: {tm(o[2])}"
        if s[1] != c[1]:  # a syntax error on one side is the likely root cause: key on it
            key = ("sibyl: " + tm(s[2])) if s[1] == "SyntaxException" else tm(c[2])
            return f"both reject, different class (cassandra {c[1]}, sibyl {s[1]}): {key}"
        if s[2] != c[2]:  # keyed on Cassandra's message, the expected one (Sibyl's is in the example)
            same = tm(s[2]) == tm(c[2])
            return f"both reject, {'message differs only in literals / position / echo' if same else 'different message'}: {c[1]}: {tm(c[2])}"

    def record(self, cat, cql, s, c):
        ans = lambda o: ({"columns": list(o[1]), "rows": [list(r) for r in o[2][:20]], "nrows": len(o[2])} if o[0] == "ok"
                         else {"error": o[1], "message": o[2]})
        rec = {"n": self.stats["statements"], "category": cat, "statement": cql, "sibyl": ans(s), "cassandra": ans(c)}
        self.jsonl.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self.jsonl.flush()
        self.cats.setdefault(cat, [0, rec])[0] += 1
        self.stats["divergences"] += 1

    def mark_dirty(self, st):
        """After a write a server applied: flags the tables whose writetime / ttl are no longer deterministic."""
        stamped = "BATCH USING TIMESTAMP" in st.cql or \
            len(re.findall(r"\bTIMESTAMP \d", st.cql)) >= len(re.findall(r"\b(INSERT|UPDATE|DELETE)\b", st.cql))
        for t in st.tables:
            self.gen.dirty[t] |= ({"wt"} if not stamped or re.search(r"\bIF\b", st.cql) else set()) | \
                ({"ttl"} if re.search(r"\bTTL [1-9]", st.cql) else set())

    def step(self, st):
        self.stats["statements"] += 1
        self.stats[st.kind] += 1
        self.log.write(st.cql + ";\n")
        s, c = self.both(st.cql)
        cat = self.category(st, s, c)
        if cat:
            self.record(cat, st.cql, s, c)
        else:
            self.stats["both ok" if s[0] == "ok" else "both same error"] += 1
        if "ok" not in (s[0], c[0]) and "timeout" not in (s[0], c[0]):
            return  # nothing changed
        if st.kind == "write":
            self.mark_dirty(st)
            if cat or s[0] != "ok" or re.match(r"\s*TRUNCATE", st.cql, re.I):
                return self.resync(st.tables)
            for t in st.tables & set(self.gen.tables):  # both applied it: do the tables still agree?
                s2, c2 = self.both(f"SELECT * FROM {t}")
                d = self.category(Stmt("", "state"), s2, c2)
                if d:
                    self.record(f"state differs after write: {d.split(': ', 1)[-1]}", f"{st.cql}  -- then: SELECT * FROM {t}", s2, c2)
                    self.resync([t])
        elif st.kind == "select" and cat and cat.startswith("different rows"):
            self.resync(st.tables)
        elif st.kind == "ddl":
            self.after_ddl(st, s, c, cat)

    def after_ddl(self, st, s, c, cat):
        """Compares the schemas after DDL both accepted; repairs divergent state: scratch objects are dropped,
        base tables rebuilt, and everything re-created when the base UDT changed."""
        if s[0] == "ok" and c[0] == "ok":
            if re.match(r"CREATE (CUSTOM )?INDEX", st.cql):
                self.wait_index_builds()
            for what, x, y in zip(("columns", "indexes", "types"), self.schema_of(self.sib), self.schema_of(self.cass)):
                if x != y:
                    cat = f"schema differs after DDL: {what}"
                    self.record(cat, st.cql, ("ok", ("schema",), tuple(map(str, x))[:40]), ("ok", ("schema",), tuple(map(str, y))[:40]))
        if cat:
            self.reset_scratch()
        self.refresh_model()
        if re.search(r"TYPE (IF (NOT )?EXISTS )?addr\b", st.cql) and (cat or self.gen.udts.get("addr") != self.base_udt):
            self.stats["full resets"] += 1
            return self.setup()
        for t in self.base_cols:
            if re.search(rf"\b{t}\b", st.cql) and (cat or t not in self.gen.tables or self.gen.tables[t].cols != self.base_cols[t]):
                self.rebuild(t)

    def run(self):
        a, start = self.a, time.time()
        try:
            self.setup()
            start = last = time.time()
            while (self.stats["statements"] < a.count) if a.count else (time.time() - start < a.duration):
                try:
                    st = self.gen.statement()
                except Exception as e:  # a generator bug costs one statement, not the run
                    self.stats["generator errors"] += 1
                    if self.stats["generator errors"] <= 5:
                        print(f"generator: {type(e).__name__}: {e}", file=sys.stderr)
                    continue
                if any(f in st.cql.lower() for f in NONDETERMINISTIC):
                    continue
                try:
                    self.step(st)
                except Exception as e:  # a server gone mid-bookkeeping: recover, never stop the run
                    print(f"statement {self.stats['statements']}: {type(e).__name__}: {e}; recovering", file=sys.stderr)
                    self.stats["bookkeeping failures"] += 1
                    self.down = self.down or {self.sib, self.cass}
                if self.down:
                    self.recover()
                if self.stats["statements"] % 400 == 0:  # keeps the data varied and the determinism flags clean
                    self.resync(list(self.base_cols))
                if time.time() - last > 60:
                    last = time.time()
                    print(f"[{int(last - start)} s] {self.stats['statements']} statements, {self.stats['divergences']} "
                          f"divergences in {len(self.cats)} categories", file=sys.stderr)
        except (KeyboardInterrupt, Gone) as e:
            print(f"stopped: {e or 'interrupted'}", file=sys.stderr)
        finally:
            self.stats["elapsed s"] = int(time.time() - start)
            if not a.keep:
                for q in (f"DROP KEYSPACE IF EXISTS {self.ks}_x", f"DROP KEYSPACE IF EXISTS {self.ks}"):
                    self.quiet(q)
            self.summary()

    def summary(self):
        st = self.stats
        lines = [f"# CQL differential fuzz, seed {self.a.seed}", "",
                 f"{st['statements']} statements in {st['elapsed s']} s ({st['select']} select, {st['write']} write, {st['ddl']} ddl); "
                 f"same answer: {st['both ok']} ok, {st['both same error']} same error; {st['divergences']} divergences in "
                 f"{len(self.cats)} categories. Resyncs {st['resyncs']}, rebuilds {st['rebuilds']}, scratch resets "
                 f"{st['scratch resets']}, full resets {st['full resets']}, reconnects sibyl {st['reconnects sibyl']} / "
                 f"cassandra {st['reconnects cassandra']}.", ""]
        short = lambda o: (f"ERROR {o['error']}: {o['message'][:300]}" if "error" in o else
                           f"{' | '.join(o['columns'])} -> {o['nrows']} rows: " + "; ".join(" | ".join(r) for r in o["rows"][:3])[:300])
        for cat, (n, rec) in sorted(self.cats.items(), key=lambda kv: -kv[1][0]):
            lines += [f"## {n} x {cat}", f"    > {rec['statement'][:500]}", f"    cassandra: {short(rec['cassandra'])}",
                      f"    sibyl:     {short(rec['sibyl'])}", ""]
        with open(os.path.join(self.a.out, "summary.md"), "w") as f:
            f.write("\n".join(lines) + "\n")
        print("\n".join(lines))


def duration(s):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([smh]?)", s)
    if not m:
        raise argparse.ArgumentTypeError("a duration like 90s, 5m or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def main():
    ap = argparse.ArgumentParser(description="Differential CQL fuzzer: Sibyl against Apache Cassandra.")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=duration, default=duration("30m"), help="e.g. 90s, 30m, 1h (default 30m)")
    ap.add_argument("--count", type=int, default=0, help="stop after N statements instead")
    ap.add_argument("--out", default="/tmp/cql_fuzz", help="output directory (default /tmp/cql_fuzz)")
    ap.add_argument("--sibyl", default="127.0.0.1:9042")
    ap.add_argument("--cassandra", default="127.0.0.1:9043")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-request timeout in seconds (default 10)")
    ap.add_argument("--reconnect-wait", type=float, default=600, help="how long to wait for a server that went away (s)")
    ap.add_argument("--keep", action="store_true", help="keep the keyspace at the end")
    ap.add_argument("--verbose", action="store_true", help="print housekeeping errors")
    Fuzzer(ap.parse_args()).run()


if __name__ == "__main__":
    main()
