package main

import (
	"bytes"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// podPrintOptions are get's printing flags besides -o.
type podPrintOptions struct {
	noHeaders, showLabels, withNamespace bool
	sortBy                               string
}

// podPrinter prints pods as kubectl get does, through cli-runtime's printers: the table
// (NAME READY STATUS RESTARTS AGE; wide adds IP, NODE, NOMINATED NODE, READINESS GATES and
// slicelet's QOS, SLICE and SOURCE), json, yaml, name, jsonpath=, go-template= and
// custom-columns= (which cli-runtime does not have; it is kubectl's spec and rules).
type podPrinter struct {
	output string
	opts   podPrintOptions
	now    func() time.Time
	print  func(obj runtime.Object, w io.Writer) error
	// table is true for the human-readable table (the objects are turned into a metav1.Table).
	table bool
}

// outputFormats are get's -o values (the ones with "=" take an argument).
const outputFormats = "wide, json, yaml, name, jsonpath=..., go-template=..., custom-columns=..."

// newPodPrinter checks -o and builds the printer.
func newPodPrinter(output string, opts podPrintOptions, now func() time.Time) (*podPrinter, error) {
	p := &podPrinter{output: output, opts: opts, now: now}
	format, arg, hasArg := strings.Cut(output, "=")
	switch {
	case output == "" || output == "wide":
		tp := printers.NewTablePrinter(printers.PrintOptions{
			Wide: output == "wide", WithNamespace: opts.withNamespace, NoHeaders: opts.noHeaders, ShowLabels: opts.showLabels,
		})
		p.print, p.table = tp.PrintObj, true
	case output == "json":
		p.print = (&printers.JSONPrinter{}).PrintObj
	case output == "yaml":
		p.print = (&printers.YAMLPrinter{}).PrintObj
	case output == "name":
		p.print = (&printers.NamePrinter{}).PrintObj
	case hasArg && (format == "jsonpath" || format == "template" || format == "go-template") && arg == "":
		return nil, usageErr("get: -o %s= needs a template", format)
	case hasArg && format == "jsonpath":
		jp, err := printers.NewJSONPathPrinter(arg)
		if err != nil {
			return nil, usageErr("get: -o jsonpath=%s: %v", arg, err)
		}
		jp.AllowMissingKeys(true)
		p.print = jp.PrintObj
	case hasArg && (format == "go-template" || format == "template"):
		gp, err := printers.NewGoTemplatePrinter([]byte(arg))
		if err != nil {
			return nil, usageErr("get: -o %s=%s: %v", format, arg, err)
		}
		gp.AllowMissingKeys(true)
		p.print = gp.PrintObj
	case hasArg && format == "custom-columns":
		cc, err := newCustomColumns(arg, opts.noHeaders)
		if err != nil {
			return nil, usageErr("get: -o custom-columns=%s: %v", arg, err)
		}
		p.print = cc.printObj
	default:
		return nil, usageErr("get: -o %q: must be %s", output, outputFormats)
	}
	if opts.sortBy != "" {
		if _, err := relaxedJSONPath(opts.sortBy); err != nil {
			return nil, usageErr("get: --sort-by %q: %v", opts.sortBy, err)
		}
	}
	return p, nil
}

// printList prints the pods; single is true when one pod was asked for by name (json, yaml and
// templates then print the pod itself, not a List).
func (p *podPrinter) printList(w io.Writer, list []v1.Pod, single bool) error {
	if p.opts.sortBy != "" {
		if err := sortPods(list, p.opts.sortBy); err != nil {
			return err
		}
	}
	for i := range list {
		list[i].Kind, list[i].APIVersion = "Pod", "v1"
	}
	if p.table {
		return p.print(podTable(list, p.now()), w)
	}
	if single && len(list) == 1 {
		return p.print(&list[0], w)
	}
	if p.output == "name" { // kubectl's name printer takes the items one by one
		for i := range list {
			if err := p.print(&list[i], w); err != nil {
				return err
			}
		}
		return nil
	}
	l := &metav1.List{TypeMeta: metav1.TypeMeta{Kind: "List", APIVersion: "v1"}, Items: []runtime.RawExtension{}}
	for i := range list {
		l.Items = append(l.Items, runtime.RawExtension{Object: &list[i]})
	}
	return p.print(l, w)
}

// printOne prints one pod of a watch (the table's header only before the first).
func (p *podPrinter) printOne(w io.Writer, pod v1.Pod) error {
	pod.Kind, pod.APIVersion = "Pod", "v1"
	if p.table {
		return p.print(podTable([]v1.Pod{pod}, p.now()), w)
	}
	return p.print(&pod, w)
}

// podColumns are kubectl's pod columns (pkg/printers/internalversion/printers.go), then
// slicelet's; priority 1 columns are shown by -o wide only.
var podColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name"},
	{Name: "Ready", Type: "string"},
	{Name: "Status", Type: "string"},
	{Name: "Restarts", Type: "string"},
	{Name: "Age", Type: "string"},
	{Name: "IP", Type: "string", Priority: 1},
	{Name: "Node", Type: "string", Priority: 1},
	{Name: "Nominated Node", Type: "string", Priority: 1},
	{Name: "Readiness Gates", Type: "string", Priority: 1},
	{Name: "QOS", Type: "string", Priority: 1},
	{Name: "Slice", Type: "string", Priority: 1},
	{Name: "Source", Type: "string", Priority: 1},
}

// podTable is the pods as a metav1.Table, what the table printer prints.
func podTable(list []v1.Pod, now time.Time) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ColumnDefinitions: podColumns}
	for i := range list {
		p := &list[i]
		r := newPodRow(p, now)
		gates := "<none>"
		if n := len(p.Spec.ReadinessGates); n > 0 {
			gates = fmt.Sprintf("%d/%d", readyGates(p), n)
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{r.Name, r.Ready, r.Status, r.Restarts, r.Age, orNoneString(p.Status.PodIP),
				orNoneString(p.Spec.NodeName), orNoneString(p.Status.NominatedNodeName), gates, r.QOS, r.Slice, r.Source},
			Object: runtime.RawExtension{Object: p},
		})
	}
	return t
}

// readyGates counts the readiness gates whose condition is True.
func readyGates(p *v1.Pod) int {
	n := 0
	for _, g := range p.Spec.ReadinessGates {
		for _, c := range p.Status.Conditions {
			if c.Type == g.ConditionType && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

func orNoneString(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// relaxedJSONPath turns kubectl's relaxed field syntax (".metadata.name", "metadata.name",
// "{.metadata.name}") into a parsed JSONPath, as kubectl's RelaxedJSONPathExpression does.
func relaxedJSONPath(expr string) (*jsonpath.JSONPath, error) {
	e := strings.TrimSpace(expr)
	if e == "" {
		return nil, fmt.Errorf("empty field path")
	}
	if !strings.HasPrefix(e, "{") {
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		e = "{" + e + "}"
	}
	jp := jsonpath.New("field").AllowMissingKeys(true)
	if err := jp.Parse(e); err != nil {
		return nil, err
	}
	return jp, nil
}

// fieldValues evaluates a JSONPath on a pod (as its JSON), returning the values found.
func fieldValues(jp *jsonpath.JSONPath, p *v1.Pod) ([]reflect.Value, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return nil, err
	}
	res, err := jp.FindResults(obj)
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return res[0], nil
}

// sortPods sorts by the field (--sort-by): numbers as numbers, everything else as text; a pod
// without the field sorts first, as kubectl sorts it.
func sortPods(list []v1.Pod, field string) error {
	jp, err := relaxedJSONPath(field)
	if err != nil {
		return err
	}
	type keyed struct {
		num   float64
		isNum bool
		text  string
		has   bool
	}
	keys := make([]keyed, len(list))
	for i := range list {
		vals, err := fieldValues(jp, &list[i])
		if err != nil {
			return fmt.Errorf("--sort-by %q: %w", field, err)
		}
		if len(vals) == 0 {
			continue
		}
		v := vals[0].Interface()
		k := keyed{has: true, text: fmt.Sprint(v)}
		switch n := v.(type) {
		case int64:
			k.num, k.isNum = float64(n), true
		case float64:
			k.num, k.isNum = n, true
		default:
			if f, err := strconv.ParseFloat(k.text, 64); err == nil {
				k.num, k.isNum = f, true
			}
		}
		keys[i] = k
	}
	idx := make([]int, len(list))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ka, kb := keys[idx[a]], keys[idx[b]]
		switch {
		case !ka.has || !kb.has:
			return !ka.has && kb.has
		case ka.isNum && kb.isNum:
			return ka.num < kb.num
		}
		return ka.text < kb.text
	})
	sorted := make([]v1.Pod, len(list))
	for i, j := range idx {
		sorted[i] = list[j]
	}
	copy(list, sorted)
	return nil
}

// customColumns is -o custom-columns=HEADER:FIELD,...: kubectl's format (k8s.io/kubectl's
// cmd/get/customcolumn.go), one line per pod, "<none>" for a field the pod does not have.
type customColumns struct {
	headers   []string
	paths     []*jsonpath.JSONPath
	noHeaders bool
}

func newCustomColumns(spec string, noHeaders bool) (*customColumns, error) {
	cc := &customColumns{noHeaders: noHeaders}
	for _, col := range strings.Split(spec, ",") {
		header, path, ok := strings.Cut(col, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("column %q: want HEADER:FIELD, e.g. NAME:.metadata.name", col)
		}
		jp, err := relaxedJSONPath(path)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", header, err)
		}
		cc.headers = append(cc.headers, header)
		cc.paths = append(cc.paths, jp)
	}
	return cc, nil
}

func (cc *customColumns) printObj(obj runtime.Object, w io.Writer) error {
	var list []*v1.Pod
	switch o := obj.(type) {
	case *v1.Pod:
		list = append(list, o)
	case *metav1.List:
		for _, item := range o.Items {
			if p, ok := item.Object.(*v1.Pod); ok {
				list = append(list, p)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 5, 8, 3, ' ', 0)
	if !cc.noHeaders {
		fmt.Fprintln(tw, strings.Join(cc.headers, "\t"))
	}
	for _, p := range list {
		cells := make([]string, len(cc.paths))
		for i, jp := range cc.paths {
			vals, err := fieldValues(jp, p)
			if err != nil {
				return err
			}
			if len(vals) == 0 {
				cells[i] = "<none>"
				continue
			}
			var parts []string
			for _, v := range vals {
				var b bytes.Buffer
				if err := jp.PrintResults(&b, []reflect.Value{v}); err != nil {
					return err
				}
				parts = append(parts, b.String())
			}
			cells[i] = strings.Join(parts, ",")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}
