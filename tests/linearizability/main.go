// Command checker checks a history of register operations recorded against a
// cluster for linearizability with Porcupine
// (github.com/anishathalye/porcupine).
//
//	checker [-timeout 60s] [-vis out.html] history.json
//
// The history is a JSON list of operations:
//
//	{"client": 0, "key": "k1", "kind": "read",  "input": {},                         "output": {"value": 3},     "call": 10, "return": 20}
//	{"client": 1, "key": "k1", "kind": "write", "input": {"value": 4},               "output": {},               "call": 12, "return": 25}
//	{"client": 2, "key": "k1", "kind": "cas",   "input": {"expected": 4, "new": 5},  "output": {"applied": true},"call": 30, "return": 41}
//	{"client": 2, "key": "k1", "kind": "cas",   "input": {"expected": null, "new": 1}, "output": "unknown",      "call": 50}
//
// Values are integers or null (no value: the row does not exist; every
// register starts as null). A read's output is the value it saw. A CAS
// applies when the register holds `expected`; its output says whether it
// did, and a CAS that did not apply may also report the value it saw
// ("value", as Cassandra's LWT does), which is then checked too. An
// operation whose outcome is indeterminate (a timeout, a lost connection)
// has the output "unknown": Porcupine's convention for it is a return at the
// end of history (it may take effect at any time after its call, or never)
// and an output every step accepts. Indeterminate reads constrain nothing
// and are left out. Operations known not to have happened (Unavailable) do
// not belong in the history at all.
//
// Every key is its own register (Porcupine's partitioning). Exit status: 0
// and "linearizable" when the history is; 1 and "NOT linearizable" plus the
// path of Porcupine's visualisation when it is not; 2 when the checker gave
// up (timeout) or the input is malformed.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// A value of the register: Set false is null (no row).
type value struct {
	Set bool
	V   int64
}

func (v value) String() string {
	if !v.Set {
		return "null"
	}
	return fmt.Sprint(v.V)
}

func fromJSON(p *int64) value {
	if p == nil {
		return value{}
	}
	return value{Set: true, V: *p}
}

type kind int

const (
	read kind = iota
	write
	cas
)

type input struct {
	Key      string
	Kind     kind
	Value    value // write
	Expected value // cas
	New      value // cas
}

type output struct {
	Unknown bool
	Value   value // read; a failed cas's observed value when HasValue
	// a failed cas that reported the value it saw
	HasValue bool
	Applied  bool // cas
}

// The register model: a read returns the value, a write sets it, a CAS sets
// it to New when it holds Expected.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return value{} },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		st := state.(value)
		i := in.(input)
		o := out.(output)
		switch i.Kind {
		case read:
			return o.Unknown || o.Value == st, st
		case write:
			return true, i.Value
		default: // cas
			holds := st == i.Expected
			if o.Unknown {
				// it may or may not have applied; when the register held
				// Expected at its linearisation point it did
				if holds {
					return true, i.New
				}
				return true, st
			}
			if o.Applied {
				return holds, i.New
			}
			if holds {
				return false, st
			}
			return !o.HasValue || o.Value == st, st
		}
	},
	Hash: func(state interface{}) uint64 {
		v := state.(value)
		if !v.Set {
			return 0x9e3779b97f4a7c15
		}
		return uint64(v.V)
	},
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		o := out.(output)
		var res string
		switch i.Kind {
		case read:
			res = "?"
			if !o.Unknown {
				res = o.Value.String()
			}
			return fmt.Sprintf("%s: read() -> %s", i.Key, res)
		case write:
			res = "ok"
			if o.Unknown {
				res = "unknown"
			}
			return fmt.Sprintf("%s: write(%s) -> %s", i.Key, i.Value, res)
		default:
			switch {
			case o.Unknown:
				res = "unknown"
			case o.Applied:
				res = "applied"
			case o.HasValue:
				res = "not applied, saw " + o.Value.String()
			default:
				res = "not applied"
			}
			return fmt.Sprintf("%s: cas(%s -> %s) -> %s", i.Key, i.Expected, i.New, res)
		}
	},
	DescribeState: func(state interface{}) string { return state.(value).String() },
}

// One operation as the recorder writes it.
type recorded struct {
	Client int             `json:"client"`
	Key    string          `json:"key"`
	Kind   string          `json:"kind"`
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
	Call   int64           `json:"call"`
	Return *int64          `json:"return"`
}

type recordedInput struct {
	Value    *int64 `json:"value"`
	Expected *int64 `json:"expected"`
	New      *int64 `json:"new"`
}

type recordedOutput struct {
	Value   *int64 `json:"value"`
	Applied *bool  `json:"applied"`
}

// parse turns recorded operations into Porcupine's, with indeterminate ones
// returning after every other event of the history.
func parse(data []byte) ([]porcupine.Operation, error) {
	var ops []recorded
	if err := json.Unmarshal(data, &ops); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var end int64
	for _, r := range ops {
		if r.Call > end {
			end = r.Call
		}
		if r.Return != nil && *r.Return > end {
			end = *r.Return
		}
	}
	infinity := end + 1
	// clients dense and zero-indexed, as the visualisation wants them
	clients := map[int]int{}
	var history []porcupine.Operation
	for n, r := range ops {
		var in input
		var ri recordedInput
		if len(r.Input) > 0 {
			if err := json.Unmarshal(r.Input, &ri); err != nil {
				return nil, fmt.Errorf("operation %d: input: %w", n, err)
			}
		}
		in.Key = r.Key
		switch r.Kind {
		case "read":
			in.Kind = read
		case "write":
			in.Kind = write
			if ri.Value == nil {
				return nil, fmt.Errorf("operation %d: a write needs input.value", n)
			}
			in.Value = fromJSON(ri.Value)
		case "cas":
			in.Kind = cas
			if ri.New == nil {
				return nil, fmt.Errorf("operation %d: a cas needs input.new", n)
			}
			in.Expected = fromJSON(ri.Expected)
			in.New = fromJSON(ri.New)
		default:
			return nil, fmt.Errorf("operation %d: kind %q is not read, write or cas", n, r.Kind)
		}
		var out output
		var s string
		if json.Unmarshal(r.Output, &s) == nil {
			switch s {
			case "unknown":
				out.Unknown = true
			case "ok":
			default:
				return nil, fmt.Errorf("operation %d: output %q", n, s)
			}
		} else if len(r.Output) > 0 && string(r.Output) != "null" {
			var ro recordedOutput
			if err := json.Unmarshal(r.Output, &ro); err != nil {
				return nil, fmt.Errorf("operation %d: output: %w", n, err)
			}
			var fields map[string]json.RawMessage
			_ = json.Unmarshal(r.Output, &fields)
			_, hasValue := fields["value"]
			switch in.Kind {
			case read:
				if !hasValue {
					return nil, fmt.Errorf("operation %d: a read needs output.value (null for none)", n)
				}
				out.Value = fromJSON(ro.Value)
			case cas:
				if ro.Applied == nil {
					return nil, fmt.Errorf("operation %d: a cas needs output.applied", n)
				}
				out.Applied = *ro.Applied
				if !out.Applied && hasValue {
					out.HasValue = true
					out.Value = fromJSON(ro.Value)
				}
			}
		} else if in.Kind != write {
			return nil, fmt.Errorf("operation %d: no output", n)
		}
		ret := infinity
		if out.Unknown {
			if in.Kind == read {
				continue // it changed nothing and saw nothing we know of
			}
		} else {
			if r.Return == nil {
				return nil, fmt.Errorf("operation %d: no return time", n)
			}
			ret = *r.Return
			if ret < r.Call {
				return nil, fmt.Errorf("operation %d: returns (%d) before its call (%d)", n, ret, r.Call)
			}
		}
		c, ok := clients[r.Client]
		if !ok {
			c = len(clients)
			clients[r.Client] = c
		}
		history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: r.Call, Output: out, Return: ret})
	}
	return history, nil
}

// check returns Porcupine's verdict and the visualisation's path when the
// history is not linearizable.
func check(history []porcupine.Operation, timeout time.Duration, vis string) (porcupine.CheckResult, error) {
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, timeout)
	if res == porcupine.Illegal && vis != "" {
		if err := porcupine.VisualizePath(registerModel, info, vis); err != nil {
			return res, err
		}
	}
	return res, nil
}

func summary(history []porcupine.Operation) string {
	kinds := map[kind]int{}
	unknown := 0
	keys := map[string]bool{}
	for _, op := range history {
		i := op.Input.(input)
		kinds[i.Kind]++
		keys[i.Key] = true
		if op.Output.(output).Unknown {
			unknown++
		}
	}
	return fmt.Sprintf("%d operations on %d keys (%d reads, %d writes, %d cas; %d indeterminate)",
		len(history), len(keys), kinds[read], kinds[write], kinds[cas], unknown)
}

func run(args []string, stdout io.Writer) int {
	fs := flag.NewFlagSet("checker", flag.ContinueOnError)
	fs.SetOutput(stdout)
	timeout := fs.Duration("timeout", 120*time.Second, "give up after this long (0: never)")
	vis := fs.String("vis", "", "where to write the visualisation of a violation (default: HISTORY.html)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(stdout, "usage: checker [-timeout D] [-vis FILE] history.json")
		return 2
	}
	path := fs.Arg(0)
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stdout, err)
		return 2
	}
	history, err := parse(data)
	if err != nil {
		fmt.Fprintln(stdout, err)
		return 2
	}
	if *vis == "" {
		*vis = strings.TrimSuffix(path, filepath.Ext(path)) + ".html"
	}
	fmt.Fprintln(stdout, summary(history))
	start := time.Now()
	res, err := check(history, *timeout, *vis)
	took := time.Since(start).Round(time.Millisecond)
	switch res {
	case porcupine.Ok:
		fmt.Fprintf(stdout, "linearizable (checked in %s)\n", took)
		return 0
	case porcupine.Illegal:
		fmt.Fprintf(stdout, "NOT linearizable (checked in %s)\n", took)
		if err != nil {
			fmt.Fprintf(stdout, "visualisation failed: %v\n", err)
		} else {
			fmt.Fprintf(stdout, "visualisation: %s\n", *vis)
		}
		return 1
	default:
		fmt.Fprintf(stdout, "unknown: the checker gave up after %s\n", took)
		return 2
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout))
}
