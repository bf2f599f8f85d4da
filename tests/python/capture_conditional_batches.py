#!/usr/bin/env python3
"""Records how Apache Cassandra 5.0.4 answers conditional batches (batches with IF
conditions) into tests/golden/conditional_batches.json.

    /work/shared/cassandra/start.sh --port 9043 --dir /tmp/cass-golden --heap 1G
    .venv/bin/python tests/python/capture_conditional_batches.py --port 9043

Every scenario runs, each time in a fresh keyspace, in four forms:
  batch_message           protocol BATCH (driver BatchStatement) of unprepared query strings
  batch_message_prepared  protocol BATCH of prepared statements (each statement prepared alone)
  cql_batch               one QUERY "BEGIN BATCH ...; APPLY BATCH"
  cql_batch_prepared      that same string prepared, then EXECUTE
and the golden keeps, per form, the result (column names in order, column types, rows)
or the error (driver class, protocol error code, server message, and whether PREPARE
or EXECUTE failed), plus the content of the scenario's tables afterwards.
test_conditional_batches.py replays the golden with run_form() below.
"""
import argparse
import json
import os
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import goldens  # noqa: E402

GOLDEN_FILE = os.path.join(goldens.GOLDEN, "conditional_batches.json")

FORMS = ["batch_message", "batch_message_prepared", "cql_batch", "cql_batch_prepared"]

# table -> (CREATE TABLE, rows inserted before every scenario that uses it)
TABLES = {
    "t": ("CREATE TABLE t (k int, c int, v int, s int static, PRIMARY KEY (k, c))",
          ["INSERT INTO t (k, c, v, s) VALUES (1, 0, 0, 10)",
           "INSERT INTO t (k, c, v) VALUES (1, 1, 1)",
           "INSERT INTO t (k, c, v) VALUES (4, 0, 40)"]),
    "p": ("CREATE TABLE p (k int PRIMARY KEY, v int, w int)",
          ["INSERT INTO p (k, v, w) VALUES (1, 1, 2)"]),
    # declared column order differs from both the alphabetical and the condition order
    "w": ("CREATE TABLE w (k int, c int, zz int, aa int, st int static, PRIMARY KEY (k, c))",
          ["INSERT INTO w (k, c, zz, aa, st) VALUES (1, 0, 1, 2, 3)",
           "INSERT INTO w (k, c, zz, aa) VALUES (1, 1, 11, 12)"]),
    "cp": ("CREATE TABLE cp (a int, b int, c int, v int, PRIMARY KEY ((a, b), c))",
           ["INSERT INTO cp (a, b, c, v) VALUES (1, 1, 0, 0)"]),
    "d": ("CREATE TABLE d (k int, c int, v int, PRIMARY KEY (k, c)) WITH CLUSTERING ORDER BY (c DESC)",
          ["INSERT INTO d (k, c, v) VALUES (1, 0, 0)",
           "INSERT INTO d (k, c, v) VALUES (1, 1, 1)"]),
    "m": ("CREATE TABLE m (k int PRIMARY KEY, mp map<text, int>, l list<int>)",
          ["INSERT INTO m (k, mp, l) VALUES (1, {'a': 1}, [1, 2])"]),
    "cnt": ("CREATE TABLE cnt (k int PRIMARY KEY, n counter)",
            ["UPDATE cnt SET n = n + 1 WHERE k = 1"]),
}


def sc(name, tables, statements, description, batch_type="LOGGED", batch_timestamp=None, setup=(), forms=None):
    return {"name": name, "tables": tables, "statements": statements, "description": description,
            "batch_type": batch_type, "batch_timestamp": batch_timestamp, "setup": list(setup),
            "forms": forms or FORMS}


CQL_ONLY = ["cql_batch", "cql_batch_prepared"]

SCENARIOS = [
    # --- table t (k, c, v, s static): partition 1 = {static s=10, c=0 v=0, c=1 v=1}, partition 4 = {c=0 v=40}
    sc("t_condition_holds", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0",
        "INSERT INTO t (k, c, v) VALUES (1, 2, 2)"],
       "the condition holds: only [applied] = true, every statement applied"),
    sc("t_condition_fails_existing_row", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 5",
        "INSERT INTO t (k, c, v) VALUES (1, 2, 2)"],
       "the condition fails on an existing row: [applied] then the primary key then the condition columns"),
    sc("t_condition_fails_missing_row", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 7 IF v = 5",
        "INSERT INTO t (k, c, v) VALUES (1, 2, 2)"],
       "the condition fails on a row that does not exist: nothing was read, so [applied] alone"),
    sc("t_condition_fails_missing_partition", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 9 AND c = 0 IF v = 5"],
       "the condition fails in a partition that does not exist"),
    sc("t_condition_null_on_missing_row", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 7 IF v = null"],
       "IF v = null on a row that does not exist"),
    sc("t_condition_null_fails", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = null"],
       "IF v = null on a row whose v is set"),
    sc("t_condition_operators_hold", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v IN (0, 5) AND v < 1 AND v != 3"],
       "IN, < and != conditions that hold"),
    sc("t_condition_operators_fail", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v IN (4, 5) AND v >= 0"],
       "an IN condition that fails"),
    sc("t_if_not_exists_row_exists", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 0, 50) IF NOT EXISTS",
        "INSERT INTO t (k, c, v) VALUES (1, 2, 2)"],
       "IF NOT EXISTS on an existing row: every column (wildcard) comes back"),
    sc("t_if_not_exists_row_missing", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 5, 50) IF NOT EXISTS",
        "INSERT INTO t (k, c, v) VALUES (1, 2, 2)"],
       "IF NOT EXISTS on a missing row of an existing partition"),
    sc("t_if_not_exists_partition_missing", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (2, 0, 1) IF NOT EXISTS",
        "INSERT INTO t (k, c, v) VALUES (2, 1, 2) IF NOT EXISTS"],
       "two IF NOT EXISTS on missing rows of a missing partition"),
    sc("t_if_not_exists_two_rows_one_exists", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 5, 50) IF NOT EXISTS",
        "INSERT INTO t (k, c, v) VALUES (1, 1, 51) IF NOT EXISTS"],
       "two IF NOT EXISTS, the second row exists"),
    sc("p_if_not_exists_same_row_twice", ["p"],
       ["INSERT INTO p (k, v) VALUES (2, 1) IF NOT EXISTS",
        "INSERT INTO p (k, w) VALUES (2, 2) IF NOT EXISTS"],
       "IF NOT EXISTS twice on the same missing row"),
    sc("t_if_exists_holds", ["t"],
       ["UPDATE t SET v = 5 WHERE k = 1 AND c = 0 IF EXISTS"],
       "UPDATE IF EXISTS on an existing row"),
    sc("t_if_exists_fails", ["t"],
       ["UPDATE t SET v = 5 WHERE k = 1 AND c = 7 IF EXISTS",
        "UPDATE t SET v = 6 WHERE k = 1 AND c = 0"],
       "UPDATE IF EXISTS on a missing row"),
    sc("t_delete_if_exists_holds", ["t"],
       ["DELETE FROM t WHERE k = 1 AND c = 1 IF EXISTS"],
       "DELETE IF EXISTS on an existing row"),
    sc("t_delete_if_condition_fails", ["t"],
       ["DELETE FROM t WHERE k = 1 AND c = 1 IF v = 99"],
       "DELETE with a failing condition"),
    sc("t_delete_column_if_condition_fails", ["t"],
       ["DELETE v FROM t WHERE k = 1 AND c = 1 IF v = 99"],
       "DELETE of a column with a failing condition"),
    sc("t_two_rows_first_fails", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 99",
        "UPDATE t SET v = 11 WHERE k = 1 AND c = 1 IF v = 1"],
       "two conditional statements on two rows of a partition, the first fails: one row per row read"),
    sc("t_two_rows_second_fails", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 0",
        "UPDATE t SET v = 11 WHERE k = 1 AND c = 1 IF v = 99"],
       "two conditional statements on two rows of a partition, the second fails"),
    sc("t_two_rows_reverse_statement_order_fails", ["t"],
       ["UPDATE t SET v = 11 WHERE k = 1 AND c = 1 IF v = 99",
        "UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 98"],
       "statements listed in reverse clustering order: rows still come in clustering order?"),
    sc("t_two_rows_both_hold", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 0",
        "UPDATE t SET v = 11 WHERE k = 1 AND c = 1 IF v = 1"],
       "two conditional statements on two rows, both hold"),
    sc("t_two_rows_one_missing_fails", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 99",
        "UPDATE t SET v = 11 WHERE k = 1 AND c = 7 IF v = 99"],
       "conditions on an existing and a missing row: only the existing row comes back"),
    sc("t_condition_row_not_conditional_row_untouched", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 99",
        "UPDATE t SET v = 11 WHERE k = 1 AND c = 1"],
       "the unconditional statement's row is not returned"),
    sc("t_same_row_two_conditions", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 0",
        "UPDATE t SET v = 11 WHERE k = 1 AND c = 0 IF v = 1"],
       "two statements with contradicting conditions on the same row"),
    sc("t_condition_sees_state_before_batch", ["t"],
       ["UPDATE t SET v = 7 WHERE k = 1 AND c = 0",
        "UPDATE t SET v = 8 WHERE k = 1 AND c = 0 IF v = 0"],
       "conditions are checked against the state before the batch; last statement wins"),
    sc("t_regular_and_static_condition_fails", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 0 AND s = 99"],
       "a regular and a static condition in one statement"),
    sc("t_static_then_regular_condition_fails", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF s = 99 AND v = 0"],
       "the static condition written first"),
    sc("t_static_condition_holds", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 1 IF s = 10",
        "INSERT INTO t (k, c, v) VALUES (1, 2, 2)"],
       "a condition on the static column holds"),
    sc("t_static_condition_fails", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 1 IF s = 99"],
       "a condition on the static column fails"),
    sc("t_static_condition_fails_with_row_update", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 1 IF s = 99",
        "UPDATE t SET v = 3 WHERE k = 1 AND c = 0"],
       "a failing static condition plus an unconditional row update"),
    sc("t_static_and_row_conditions_fail", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 1 IF s = 99",
        "UPDATE t SET v = 3 WHERE k = 1 AND c = 1 IF v = 99"],
       "a static condition and a row condition in two statements, both fail"),
    sc("t_static_condition_holds_row_condition_fails", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 1 IF s = 10",
        "UPDATE t SET v = 3 WHERE k = 1 AND c = 1 IF v = 99"],
       "the static condition holds, the row condition fails"),
    sc("t_static_condition_partition_without_static", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 4 IF s = 99"],
       "a static condition in a partition that has rows but no static value"),
    sc("t_static_condition_null_partition_without_static", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 4 IF s = null"],
       "IF s = null in a partition that has rows but no static value"),
    sc("t_static_condition_missing_partition", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 9 IF s = 1"],
       "a static condition in a partition that does not exist"),
    sc("t_static_condition_null_missing_partition", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 9 IF s = null"],
       "IF s = null in a partition that does not exist"),
    sc("t_static_condition_static_only_partition", ["t"],
       ["UPDATE t SET s = 11 WHERE k = 5 IF s = 99"],
       "a failing static condition in a partition that has a static value and no rows",
       setup=["INSERT INTO t (k, s) VALUES (5, 50)"]),
    sc("t_row_condition_static_only_partition", ["t"],
       ["UPDATE t SET v = 1 WHERE k = 5 AND c = 0 IF v = 99"],
       "a failing row condition in a partition that has a static value and no rows",
       setup=["INSERT INTO t (k, s) VALUES (5, 50)"]),
    sc("t_if_not_exists_static_only_partition", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (5, 0, 1) IF NOT EXISTS"],
       "IF NOT EXISTS on a row of a partition that has only a static value",
       setup=["INSERT INTO t (k, s) VALUES (5, 50)"]),
    sc("t_static_insert_if_not_exists_static_only_partition", ["t"],
       ["INSERT INTO t (k, s) VALUES (5, 51) IF NOT EXISTS"],
       "a static-only INSERT IF NOT EXISTS in a partition that has only a static value",
       setup=["INSERT INTO t (k, s) VALUES (5, 50)"]),
    sc("t_static_insert_if_not_exists_static_exists", ["t"],
       ["INSERT INTO t (k, s) VALUES (1, 5) IF NOT EXISTS"],
       "a static-only INSERT IF NOT EXISTS in a partition with a static value"),
    sc("t_static_insert_if_not_exists_no_static", ["t"],
       ["INSERT INTO t (k, s) VALUES (4, 5) IF NOT EXISTS"],
       "a static-only INSERT IF NOT EXISTS in a partition with rows but no static value"),
    sc("t_not_exists_and_condition_other_rows", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 5, 50) IF NOT EXISTS",
        "UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 99"],
       "IF NOT EXISTS on one row plus a failing condition on another: wildcard columns"),
    sc("t_condition_and_not_exists_other_rows", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 99",
        "INSERT INTO t (k, c, v) VALUES (1, 1, 50) IF NOT EXISTS"],
       "a failing condition, then IF NOT EXISTS on an existing row"),
    sc("t_not_exists_and_exists_same_row", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 0, 50) IF NOT EXISTS",
        "UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF EXISTS"],
       "IF NOT EXISTS and IF EXISTS on the same row"),
    sc("t_not_exists_and_condition_same_row", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 0, 50) IF NOT EXISTS",
        "UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 0"],
       "IF NOT EXISTS and a column condition on the same row"),
    sc("t_exists_and_condition_same_row", ["t"],
       ["UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF EXISTS",
        "UPDATE t SET v = 11 WHERE k = 1 AND c = 0 IF v = 0"],
       "IF EXISTS and a column condition on the same row"),
    sc("t_range_delete_with_condition_holds", ["t"],
       ["DELETE FROM t WHERE k = 1 AND c > 0",
        "UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 0"],
       "a range deletion in a conditional batch"),
    sc("t_range_delete_with_condition_fails", ["t"],
       ["DELETE FROM t WHERE k = 1 AND c > 0",
        "UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 99"],
       "a range deletion in a conditional batch whose condition fails"),
    sc("t_partition_delete_with_condition", ["t"],
       ["DELETE FROM t WHERE k = 1",
        "UPDATE t SET v = 10 WHERE k = 1 AND c = 0 IF v = 0"],
       "a partition deletion in a conditional batch"),
    sc("t_unlogged_conditional_batch", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0",
        "INSERT INTO t (k, c, v) VALUES (1, 2, 2)"],
       "an UNLOGGED batch with a condition", batch_type="UNLOGGED"),
    sc("t_unlogged_conditional_batch_fails", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 9"],
       "an UNLOGGED batch whose condition fails", batch_type="UNLOGGED"),
    sc("t_ttl_statement_in_conditional_batch", ["t"],
       ["UPDATE t USING TTL 1000 SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "USING TTL on a conditional statement is allowed"),
    # --- errors
    sc("err_two_partitions", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0",
        "UPDATE t SET v = 100 WHERE k = 4 AND c = 0"],
       "a conditional batch on two partitions"),
    sc("err_two_partitions_condition_second", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 4 AND c = 0",
        "UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "a conditional batch on two partitions, the condition in the second statement"),
    sc("err_two_partitions_composite_key", ["cp"],
       ["UPDATE cp SET v = 1 WHERE a = 1 AND b = 1 AND c = 0 IF v = 0",
        "UPDATE cp SET v = 1 WHERE a = 1 AND b = 2 AND c = 0 IF v = 0"],
       "two partitions differing in one component of a composite partition key"),
    sc("err_two_tables", ["t", "p"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0",
        "UPDATE p SET v = 100 WHERE k = 1"],
       "a conditional batch on two tables"),
    sc("err_two_tables_condition_second", ["t", "p"],
       ["UPDATE p SET v = 100 WHERE k = 1",
        "UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "a conditional batch on two tables, the condition in the second statement"),
    sc("err_counter_condition", ["cnt"],
       ["UPDATE cnt SET n = n + 1 WHERE k = 1 IF n = 1"],
       "a condition on a counter table in a COUNTER batch", batch_type="COUNTER"),
    sc("err_counter_condition_logged", ["cnt"],
       ["UPDATE cnt SET n = n + 1 WHERE k = 1 IF n = 1"],
       "a condition on a counter table in a LOGGED batch"),
    sc("err_counter_with_conditional_statement", ["t", "cnt"],
       ["UPDATE cnt SET n = n + 1 WHERE k = 1",
        "UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "a counter update and a conditional statement in a LOGGED batch"),
    sc("err_counter_batch_with_conditional_statement", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "a conditional non-counter statement in a COUNTER batch", batch_type="COUNTER"),
    sc("err_using_timestamp_on_batch", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "USING TIMESTAMP on a conditional batch (only expressible in CQL)", batch_timestamp=1000,
       forms=CQL_ONLY),
    sc("err_using_timestamp_on_batch_unconditional_statement_first", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 2, 2)",
        "UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "USING TIMESTAMP on a conditional batch whose first statement is unconditional",
       batch_timestamp=1000, forms=CQL_ONLY),
    sc("err_using_timestamp_on_conditional_statement", ["t"],
       ["UPDATE t USING TIMESTAMP 1000 SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "USING TIMESTAMP on a conditional statement in a batch"),
    sc("using_timestamp_on_unconditional_statement", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 2, 2) USING TIMESTAMP 1000",
        "UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "USING TIMESTAMP on the unconditional statement of a conditional batch"),
    sc("err_using_timestamp_on_batch_and_statement", ["t"],
       ["INSERT INTO t (k, c, v) VALUES (1, 2, 2) USING TIMESTAMP 1000",
        "UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0"],
       "USING TIMESTAMP on a conditional batch and on one of its statements", batch_timestamp=2000,
       forms=CQL_ONLY),
    sc("in_single_value_on_partition_key_conditional", ["t"],
       ["UPDATE t SET v = 100 WHERE k IN (1) AND c = 0 IF v = 0"],
       "IN with a single value on the partition key of a conditional statement is an equality"),
    sc("err_in_on_partition_key_conditional", ["t"],
       ["UPDATE t SET v = 100 WHERE k IN (1, 4) AND c = 0 IF v = 0"],
       "IN on the partition key of a conditional statement"),
    sc("err_in_on_partition_key_unconditional", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0",
        "UPDATE t SET v = 100 WHERE k IN (1, 4) AND c = 1"],
       "IN on the partition key of the unconditional statement of a conditional batch"),
    sc("err_in_on_clustering_conditional", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c IN (0, 1) IF v = 0"],
       "IN on the clustering key of a conditional statement"),
    sc("err_in_on_clustering_unconditional", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0",
        "UPDATE t SET v = 100 WHERE k = 1 AND c IN (0, 1)"],
       "IN on the clustering key of the unconditional statement of a conditional batch"),
    sc("err_in_on_clustering_unconditional_delete", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF v = 0",
        "DELETE FROM t WHERE k = 1 AND c IN (0, 1)"],
       "IN on the clustering key of an unconditional DELETE in a conditional batch"),
    sc("err_condition_on_primary_key_column", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF c = 0"],
       "a condition on a clustering column"),
    sc("err_condition_unknown_column", ["t"],
       ["UPDATE t SET v = 100 WHERE k = 1 AND c = 0 IF nope = 0"],
       "a condition on a column that does not exist"),
    # --- table p (k PRIMARY KEY, v, w): row 1 = {v=1, w=2}
    sc("p_condition_holds", ["p"],
       ["UPDATE p SET v = 2 WHERE k = 1 IF v = 1",
        "UPDATE p SET w = 3 WHERE k = 1"],
       "no clustering columns: the condition holds"),
    sc("p_condition_fails", ["p"],
       ["UPDATE p SET v = 2 WHERE k = 1 IF v = 5",
        "UPDATE p SET w = 3 WHERE k = 1"],
       "no clustering columns: the condition fails"),
    sc("p_conditions_on_two_columns_in_two_statements", ["p"],
       ["UPDATE p SET v = 2 WHERE k = 1 IF w = 9",
        "UPDATE p SET w = 3 WHERE k = 1 IF v = 9"],
       "conditions on w then v in two statements on the same row: one row, columns in order of appearance"),
    sc("p_same_column_conditioned_twice", ["p"],
       ["UPDATE p SET v = 2 WHERE k = 1 IF v = 9 AND w = 2",
        "UPDATE p SET w = 3 WHERE k = 1 IF v = 1"],
       "the same column in conditions of two statements appears once"),
    sc("p_if_not_exists_row_exists", ["p"],
       ["INSERT INTO p (k, v) VALUES (1, 5) IF NOT EXISTS"],
       "no clustering columns: IF NOT EXISTS on an existing row"),
    sc("p_if_not_exists_row_missing", ["p"],
       ["INSERT INTO p (k, v) VALUES (2, 5) IF NOT EXISTS",
        "UPDATE p SET w = 6 WHERE k = 2"],
       "no clustering columns: IF NOT EXISTS on a missing row"),
    sc("p_delete_if_exists_missing", ["p"],
       ["DELETE FROM p WHERE k = 2 IF EXISTS"],
       "DELETE IF EXISTS on a missing row"),
    sc("p_delete_if_exists_holds", ["p"],
       ["DELETE FROM p WHERE k = 1 IF EXISTS"],
       "DELETE IF EXISTS on an existing row"),
    sc("p_update_if_exists_fails", ["p"],
       ["UPDATE p SET v = 2 WHERE k = 2 IF EXISTS"],
       "UPDATE IF EXISTS on a missing row"),
    # --- table w (k, c, zz, aa, st static): declared order zz, aa; partition 1 = {st=3, c=0 {1, 2}, c=1 {11, 12}}
    sc("w_condition_order_zz_aa", ["w"],
       ["UPDATE w SET zz = 5 WHERE k = 1 AND c = 0 IF zz = 9 AND aa = 9"],
       "conditions on zz then aa"),
    sc("w_condition_order_aa_zz", ["w"],
       ["UPDATE w SET zz = 5 WHERE k = 1 AND c = 0 IF aa = 9 AND zz = 9"],
       "conditions on aa then zz"),
    sc("w_condition_order_across_statements", ["w"],
       ["UPDATE w SET zz = 5 WHERE k = 1 AND c = 1 IF aa = 9",
        "UPDATE w SET zz = 5 WHERE k = 1 AND c = 0 IF zz = 9"],
       "aa on row 1 then zz on row 0"),
    sc("w_condition_static_last", ["w"],
       ["UPDATE w SET zz = 5 WHERE k = 1 AND c = 0 IF aa = 9 AND st = 9 AND zz = 9"],
       "a static condition between regular ones"),
    sc("w_if_not_exists_wildcard_order", ["w"],
       ["INSERT INTO w (k, c, zz) VALUES (1, 0, 5) IF NOT EXISTS"],
       "the wildcard column order when IF NOT EXISTS fails"),
    sc("w_if_exists_and_condition_wildcard_two_rows", ["w"],
       ["UPDATE w SET zz = 5 WHERE k = 1 AND c = 1 IF EXISTS",
        "UPDATE w SET zz = 5 WHERE k = 1 AND c = 0 IF aa = 99"],
       "IF EXISTS on one row, a failing condition on another: wildcard columns, two rows"),
    # --- table d: clustering order DESC
    sc("d_two_rows_desc_order", ["d"],
       ["UPDATE d SET v = 10 WHERE k = 1 AND c = 0 IF v = 99",
        "UPDATE d SET v = 11 WHERE k = 1 AND c = 1 IF v = 99"],
       "rows of a DESC clustering order table"),
    # --- composite partition key
    sc("cp_condition_fails", ["cp"],
       ["UPDATE cp SET v = 1 WHERE a = 1 AND b = 1 AND c = 0 IF v = 9"],
       "a composite partition key: every primary key column comes back"),
    # --- collections
    sc("m_map_element_condition_fails", ["m"],
       ["UPDATE m SET l = l + [3] WHERE k = 1 IF mp['a'] = 2 AND mp['b'] = null"],
       "conditions on map elements: the whole map comes back once"),
    sc("m_map_element_condition_holds", ["m"],
       ["UPDATE m SET l = [7, 8] WHERE k = 1 IF mp['a'] = 1",
        "UPDATE m SET mp['b'] = 2 WHERE k = 1"],
       "a condition on a map element holds (no list append here: where Cassandra puts an element appended "
       "by a CAS write relative to the elements written just before by a plain write varies from run to run)"),
    sc("m_list_condition_fails", ["m"],
       ["UPDATE m SET l = [9] WHERE k = 1 IF l = [1] AND mp CONTAINS KEY 'a'"],
       "conditions on a whole list and CONTAINS KEY"),
]


def to_json(v):
    """A driver value as JSON: maps become objects (text keys) or lists of pairs, sets sorted lists."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (uuid.UUID,)):
        return str(v)
    if hasattr(v, "items"):
        items = list(v.items())
        if all(isinstance(k, str) for k, _ in items):
            return {k: to_json(x) for k, x in items}
        return [[to_json(k), to_json(x)] for k, x in items]
    if isinstance(v, (set, frozenset)) or type(v).__name__ == "SortedSet":
        return [to_json(x) for x in sorted(v)]
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return repr(v)


def type_name(t):
    return t.cql_parameterized_type() if hasattr(t, "cql_parameterized_type") else str(t)


def error_json(e, phase, keyspace):
    """The server's error; `raised` is what the driver raised (it wraps a ServerError in NoHostAvailable
    after trying the only host); the keyspace name in the message becomes {ks}."""
    from cassandra.cluster import NoHostAvailable
    raised = type(e).__name__
    if isinstance(e, NoHostAvailable) and len(e.errors) == 1:
        (e,) = e.errors.values()
    cls, code, message = goldens.server_error(e)
    return {"phase": phase, "raised": raised, "class": cls, "code": code,
            "message": message.replace(keyspace, "{ks}")}


def cql_batch_text(scenario):
    head = {"LOGGED": "BEGIN BATCH", "UNLOGGED": "BEGIN UNLOGGED BATCH", "COUNTER": "BEGIN COUNTER BATCH"}
    text = head[scenario["batch_type"]]
    if scenario["batch_timestamp"] is not None:
        text += f" USING TIMESTAMP {scenario['batch_timestamp']}"
    return text + " " + " ".join(s + ";" for s in scenario["statements"]) + " APPLY BATCH"


def setup(session, scenario, tables=None):
    """Creates and fills the scenario's tables; `tables` is name -> (CREATE TABLE, inserts), TABLES by default."""
    for table in scenario["tables"]:
        create, rows = (tables or TABLES)[table]
        session.execute(create)
        for r in rows:
            session.execute(r)
    for st in scenario["setup"]:
        session.execute(st)


def table_contents(session, tables):
    out = {}
    for table in tables:
        rs = session.execute(f"SELECT * FROM {table}")
        rows = sorted((to_json(list(r)) for r in rs), key=lambda r: json.dumps(r, sort_keys=True))
        out[table] = {"columns": list(rs.column_names), "rows": rows}
    return out


def run_form(session, scenario, form):
    """Runs the scenario's batch in `form` (the tables already set up); returns the observed answer."""
    from cassandra.query import BatchStatement, BatchType, SimpleStatement
    from cassandra.query import tuple_factory

    session.row_factory = tuple_factory
    phase = "prepare"
    try:
        if form in ("batch_message", "batch_message_prepared"):
            assert scenario["batch_timestamp"] is None, "USING TIMESTAMP on the batch exists only in CQL"
            batch = BatchStatement(batch_type=getattr(BatchType, scenario["batch_type"]))
            for st in scenario["statements"]:
                batch.add(session.prepare(st) if form == "batch_message_prepared" else SimpleStatement(st))
            phase = "execute"
            rs = session.execute(batch)
        elif form == "cql_batch":
            phase = "execute"
            rs = session.execute(cql_batch_text(scenario))
        elif form == "cql_batch_prepared":
            prepared = session.prepare(cql_batch_text(scenario))
            phase = "execute"
            rs = session.execute(prepared)
        else:
            raise ValueError(form)
    except Exception as e:  # noqa: BLE001 - the error is the answer
        out = {"error": error_json(e, phase, session.keyspace)}
    else:
        if rs.column_names is None:
            out = {"void": True}
        else:
            out = {"columns": list(rs.column_names), "types": [type_name(t) for t in rs.column_types],
                   "rows": [to_json(list(r)) for r in rs]}
    out["after"] = table_contents(session, scenario["tables"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=9043)
    ap.add_argument("-k", default=None, help="only scenarios whose name contains this (prints, writes nothing)")
    a = ap.parse_args()
    from cassandra.cluster import Cluster

    cluster = Cluster([a.host], port=a.port)
    session = cluster.connect()
    golden = {
        "_about": "Conditional batches as Apache Cassandra 5.0.4 answers them through the Python driver "
                  "(cassandra-driver 3.30.1, protocol v5). Written by tests/python/capture_conditional_batches.py; "
                  "replayed by tests/python/test_conditional_batches.py. Each scenario runs in a fresh keyspace "
                  "whose tables are created and filled by the listed setup, in each of the listed forms: "
                  + "; ".join(FORMS) + ". 'after' is SELECT * of each table once the batch ran (rows sorted).",
        "tables": {name: {"create": c, "rows": r} for name, (c, r) in TABLES.items()},
        "scenarios": {},
    }
    for scenario in SCENARIOS:
        if a.k and a.k not in scenario["name"]:
            continue
        results = {}
        for form in scenario["forms"]:
            ks = "cb_" + uuid.uuid4().hex[:12]
            session.execute(f"CREATE KEYSPACE {ks} WITH replication = "
                            "{'class': 'SimpleStrategy', 'replication_factor': 1}")
            session.set_keyspace(ks)
            try:
                setup(session, scenario)
                results[form] = run_form(session, scenario, form)
            finally:
                session.set_keyspace("system")
                session.execute(f"DROP KEYSPACE {ks}")
        entry = {k: scenario[k] for k in ("description", "tables", "setup", "batch_type", "batch_timestamp",
                                          "statements")}
        entry["cql"] = cql_batch_text(scenario)
        entry["forms"] = results
        distinct = {json.dumps(r, sort_keys=True) for r in results.values()}
        entry["forms_agree"] = len(distinct) == 1
        golden["scenarios"][scenario["name"]] = entry
        first = results[scenario["forms"][0]]
        print(f"{scenario['name']}: agree={entry['forms_agree']} "
              f"{json.dumps({k: v for k, v in first.items() if k != 'after'})}")
        if not entry["forms_agree"]:
            for f, r in results.items():
                print(f"    {f}: {json.dumps({k: v for k, v in r.items() if k != 'after'})}")
    cluster.shutdown()
    if a.k:
        return
    with open(GOLDEN_FILE, "w") as f:
        f.write(json.dumps(golden, indent=1, sort_keys=False) + "\n")
    print("wrote", os.path.relpath(GOLDEN_FILE))


if __name__ == "__main__":
    main()
