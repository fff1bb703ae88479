package pods

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LogQuery is a container log request's query (v1.PodLogOptions), parsed and validated.
type LogQuery struct {
	Options LogOptions
	// LimitBytes stops the output after that many bytes; 0 means no limit.
	LimitBytes int64
	// Empty is tailLines=0: no lines at all (LogOptions's 0 means all).
	Empty bool
}

// maxSinceSeconds bounds sinceSeconds (about 272 years) so that it stays a time.Duration.
const maxSinceSeconds = 1 << 33

// ParseLogQuery reads a log request's query as the kubelet does (pkg/kubelet/server/server.go
// getContainerLogs: the legacy tail parameter, then the query decoded into a v1.PodLogOptions and
// checked by ValidatePodLogOptions), for the kubelet API and the local API alike:
//
//   - follow, previous, timestamps: present and not "0" or "false" is true, as apimachinery's
//     Convert_Slice_string_To_bool ("follow=" is true);
//   - tailLines ≥ 0, where 0 is no lines; tail is its older name and wins, "tail=all" is all;
//   - limitBytes ≥ 1;
//   - sinceSeconds ≥ 1 (counted back from now) or sinceTime, RFC 3339 with or without
//     fractional seconds (metav1.Time), not both;
//   - stream All only (slicelet keeps one log per container).
//
// An error names the parameter.
func ParseLogQuery(q url.Values, now time.Time) (LogQuery, error) {
	var out LogQuery
	if tail := q.Get("tail"); tail != "" {
		q = cloneValues(q)
		q.Set("tailLines", tail)
		if tail == "all" {
			q.Del("tailLines")
		}
	}
	for _, b := range []struct {
		name string
		dst  *bool
	}{{"follow", &out.Options.Follow}, {"previous", &out.Options.Previous}, {"timestamps", &out.Options.Timestamps}} {
		if vs, ok := q[b.name]; ok && len(vs) > 0 {
			*b.dst = vs[0] != "0" && !strings.EqualFold(vs[0], "false")
		}
	}
	integer := func(name string, min int64, what string) (int64, bool, error) {
		vs, ok := q[name]
		if !ok || len(vs) == 0 {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q is not a whole number", name, vs[0])
		}
		if n < min {
			return 0, false, fmt.Errorf("%s: %d: must be %s", name, n, what)
		}
		return n, true, nil
	}
	tail, ok, err := integer("tailLines", 0, "greater than or equal to 0")
	if err != nil {
		return out, err
	}
	if ok {
		out.Empty = tail == 0
		out.Options.TailLines = int(min(tail, int64(^uint32(0)>>1)))
	}
	if out.LimitBytes, _, err = integer("limitBytes", 1, "greater than 0"); err != nil {
		return out, err
	}
	since, hasSeconds, err := integer("sinceSeconds", 1, "greater than 0")
	if err != nil {
		return out, err
	}
	if vs, ok := q["sinceTime"]; ok && len(vs) > 0 {
		if hasSeconds {
			return out, errors.New("sinceTime: at most one of sinceTime or sinceSeconds may be given")
		}
		var t metav1.Time
		if err := t.UnmarshalQueryParameter(vs[0]); err != nil {
			return out, fmt.Errorf("sinceTime: %q is not an RFC 3339 time", vs[0])
		}
		out.Options.SinceTime = t.Time
	}
	if hasSeconds {
		out.Options.SinceTime = now.Add(-time.Duration(min(since, maxSinceSeconds)) * time.Second)
	}
	if out.Empty && out.Options.Follow {
		// No lines of what is there, then the new ones (kubectl logs -f --tail=0).
		out.Empty = false
		if out.Options.SinceTime.Before(now) {
			out.Options.SinceTime = now
		}
	}
	if v := q.Get("stream"); v != "" && v != v1.LogStreamAll {
		return out, fmt.Errorf("stream: %q is not supported (slicelet keeps one log per container: %s only)", v, v1.LogStreamAll)
	}
	return out, nil
}

// Values is the query ParseLogQuery reads back as q (a client's side).
func (q LogQuery) Values() url.Values {
	v := url.Values{}
	o := q.Options
	for _, b := range []struct {
		name string
		set  bool
	}{{"follow", o.Follow}, {"previous", o.Previous}, {"timestamps", o.Timestamps}} {
		if b.set {
			v.Set(b.name, "true")
		}
	}
	switch {
	case q.Empty:
		v.Set("tailLines", "0")
	case o.TailLines > 0:
		v.Set("tailLines", strconv.Itoa(o.TailLines))
	}
	if q.LimitBytes > 0 {
		v.Set("limitBytes", strconv.FormatInt(q.LimitBytes, 10))
	}
	if !o.SinceTime.IsZero() {
		v.Set("sinceTime", o.SinceTime.UTC().Format(time.RFC3339Nano))
	}
	return v
}

func cloneValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, v := range q {
		out[k] = v
	}
	return out
}

// ErrLogLimit ends a log at its query's limitBytes.
var ErrLogLimit = errors.New("limitBytes reached")

// Writer is where the log the query selects goes, written through to w: nothing when Empty,
// and at most LimitBytes, after which a write fails with ErrLogLimit.
func (q LogQuery) Writer(w io.Writer) io.Writer {
	if q.Empty {
		return io.Discard
	}
	if q.LimitBytes <= 0 {
		return w
	}
	return &limitWriter{w: w, left: q.LimitBytes}
}

type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	cut := false
	if int64(len(p)) > l.left {
		p, cut = p[:l.left], true
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err == nil && cut {
		err = ErrLogLimit
	}
	return n, err
}
