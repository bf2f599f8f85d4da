package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runOn writes history to a file and runs the command on it.
func runOn(t *testing.T, history string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "history.json")
	if err := os.WriteFile(path, []byte(history), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	code := run([]string{path}, &out)
	return code, out.String(), filepath.Join(dir, "history.html")
}

func expectLinearizable(t *testing.T, history string) {
	t.Helper()
	code, out, _ := runOn(t, history)
	if code != 0 || !strings.Contains(out, "linearizable") || strings.Contains(out, "NOT") {
		t.Fatalf("want linearizable, got exit %d:\n%s", code, out)
	}
}

func expectViolation(t *testing.T, history string) {
	t.Helper()
	code, out, vis := runOn(t, history)
	if code != 1 || !strings.Contains(out, "NOT linearizable") || !strings.Contains(out, "visualisation: "+vis) {
		t.Fatalf("want NOT linearizable, got exit %d:\n%s", code, out)
	}
	if st, err := os.Stat(vis); err != nil || st.Size() == 0 {
		t.Fatalf("no visualisation at %s: %v", vis, err)
	}
}

func TestReadsAndWritesLinearizable(t *testing.T) {
	// the read concurrent with the write of 2 may see 1 or 2; the later
	// one must see 2; key b is a register of its own
	expectLinearizable(t, `[
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {}, "call": 0, "return": 10},
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 2}, "output": "ok", "call": 20, "return": 40},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 1}, "call": 25, "return": 30},
		{"client": 2, "key": "a", "kind": "read", "input": {}, "output": {"value": 2}, "call": 26, "return": 31},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 2}, "call": 45, "return": 50},
		{"client": 2, "key": "b", "kind": "read", "input": {}, "output": {"value": null}, "call": 45, "return": 50}
	]`)
}

func TestStaleReadIsAViolation(t *testing.T) {
	// the write of 2 was acknowledged before the read began, which still
	// saw 1
	expectViolation(t, `[
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {}, "call": 0, "return": 10},
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 2}, "output": {}, "call": 20, "return": 30},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 1}, "call": 35, "return": 40}
	]`)
}

func TestNonMonotonicReadsAreAViolation(t *testing.T) {
	// the write is still running, but once one read has seen 2 a later one
	// cannot see 1 again
	expectViolation(t, `[
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {}, "call": 0, "return": 10},
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 2}, "output": {}, "call": 20, "return": 100},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 2}, "call": 30, "return": 40},
		{"client": 2, "key": "a", "kind": "read", "input": {}, "output": {"value": 1}, "call": 50, "return": 60}
	]`)
}

func TestIndeterminateWriteMayTakeEffectLaterOrNever(t *testing.T) {
	// the write of 2 timed out: a read long after may see it, and a read
	// after that still sees it (it took effect before the first read)
	expectLinearizable(t, `[
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {}, "call": 0, "return": 10},
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 2}, "output": "unknown", "call": 20, "return": 30},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 1}, "call": 500, "return": 510},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 2}, "call": 1000, "return": 1010},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": "unknown", "call": 1020}
	]`)
	// but not before it was called
	expectViolation(t, `[
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {}, "call": 0, "return": 10},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 2}, "call": 12, "return": 15},
		{"client": 0, "key": "a", "kind": "write", "input": {"value": 2}, "output": "unknown", "call": 20}
	]`)
}

func TestCompareAndSetLinearizable(t *testing.T) {
	expectLinearizable(t, `[
		{"client": 0, "key": "a", "kind": "cas", "input": {"expected": null, "new": 0}, "output": {"applied": true}, "call": 0, "return": 10},
		{"client": 1, "key": "a", "kind": "cas", "input": {"expected": null, "new": 0}, "output": {"applied": false, "value": 0}, "call": 5, "return": 12},
		{"client": 0, "key": "a", "kind": "cas", "input": {"expected": 0, "new": 1}, "output": {"applied": true}, "call": 20, "return": 30},
		{"client": 1, "key": "a", "kind": "cas", "input": {"expected": 0, "new": 2}, "output": {"applied": false}, "call": 21, "return": 31},
		{"client": 2, "key": "a", "kind": "cas", "input": {"expected": 1, "new": 3}, "output": "unknown", "call": 32},
		{"client": 1, "key": "a", "kind": "read", "input": {}, "output": {"value": 3}, "call": 40, "return": 50}
	]`)
}

func TestTwoAppliedCompareAndSetsFromOneValueAreAViolation(t *testing.T) {
	// the lost update: both saw 0 and both applied
	expectViolation(t, `[
		{"client": 0, "key": "a", "kind": "cas", "input": {"expected": null, "new": 0}, "output": {"applied": true}, "call": 0, "return": 10},
		{"client": 0, "key": "a", "kind": "cas", "input": {"expected": 0, "new": 1}, "output": {"applied": true}, "call": 20, "return": 30},
		{"client": 1, "key": "a", "kind": "cas", "input": {"expected": 0, "new": 2}, "output": {"applied": true}, "call": 21, "return": 31}
	]`)
}

func TestFailedCompareAndSetSeeingAStaleValueIsAViolation(t *testing.T) {
	expectViolation(t, `[
		{"client": 0, "key": "a", "kind": "cas", "input": {"expected": null, "new": 0}, "output": {"applied": true}, "call": 0, "return": 10},
		{"client": 0, "key": "a", "kind": "cas", "input": {"expected": 0, "new": 1}, "output": {"applied": true}, "call": 20, "return": 30},
		{"client": 1, "key": "a", "kind": "cas", "input": {"expected": 5, "new": 6}, "output": {"applied": false, "value": 0}, "call": 40, "return": 50}
	]`)
}

func TestMalformedHistory(t *testing.T) {
	for _, h := range []string{
		`{`,
		`[{"client": 0, "key": "a", "kind": "delete", "input": {}, "output": {}, "call": 0, "return": 1}]`,
		`[{"client": 0, "key": "a", "kind": "read", "input": {}, "output": {}, "call": 0, "return": 1}]`,
		`[{"client": 0, "key": "a", "kind": "write", "input": {"value": 1}, "output": {}, "call": 5, "return": 1}]`,
	} {
		if code, out, _ := runOn(t, h); code != 2 {
			t.Errorf("%s: exit %d:\n%s", h, code, out)
		}
	}
}
