package pods

import (
	"bytes"
	"io"
	"time"
)

// LogWriter writes a container log's lines as LogOptions ask, for every runtime: a line
// written before SinceTime is left out and, with Timestamps, prefixed with its time
// (LogOptions.Line); with TailLines the lines are kept until Flush, which writes the last
// TailLines of them, and written at once after it (the lines a Follow streams).
type LogWriter struct {
	opts    LogOptions
	w       io.Writer
	tail    [][]byte
	flushed bool
}

// NewLogWriter returns a LogWriter writing to w.
func NewLogWriter(opts LogOptions, w io.Writer) *LogWriter {
	return &LogWriter{opts: opts, w: w}
}

// WriteLine is one line (with its newline, if it has one) written at ts. A line kept for
// TailLines is copied: the caller may reuse it.
func (l *LogWriter) WriteLine(ts time.Time, line []byte) error {
	line, ok := l.opts.Line(ts, line)
	if !ok {
		return nil
	}
	if l.opts.TailLines <= 0 || l.flushed {
		_, err := l.w.Write(line)
		return err
	}
	l.tail = append(l.tail, bytes.Clone(line))
	if len(l.tail) > l.opts.TailLines {
		l.tail = l.tail[1:]
	}
	return nil
}

// Flush writes the lines kept for TailLines; the lines after it are written at once.
func (l *LogWriter) Flush() error {
	l.flushed = true
	tail := l.tail
	l.tail = nil
	for _, line := range tail {
		if _, err := l.w.Write(line); err != nil {
			return err
		}
	}
	return nil
}
