package config

import (
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// position is a 1-based line and byte column.
type position struct{ Line, Col int }

// locateKeys returns where each key of a TOML document is first written, by
// full dotted key (toml.Key.String()).
//
// Why this exists: BurntSushi/toml v1.6.0 records key positions internally but
// exposes them only inside a ParseError, so a light scan of the (already
// successfully parsed, hence valid) document finds them. It understands
// comments, [tables], [[arrays]], dotted and quoted keys, inline tables (also
// multi-line, TOML 1.1), arrays and every string form; it does not validate.
// Keys inside arrays are not recorded: the configuration has no arrays of tables.
func locateKeys(src []byte) map[string]position {
	l := &locator{src: src, line: 1, col: 1, out: map[string]position{}}
	l.document()
	return l.out
}

type locator struct {
	src       []byte
	i         int
	line, col int
	out       map[string]position
}

func (l *locator) eof() bool { return l.i >= len(l.src) }

func (l *locator) peek(n int) byte {
	if l.i+n < len(l.src) {
		return l.src[l.i+n]
	}
	return 0
}

func (l *locator) advance() {
	if l.eof() {
		return
	}
	if l.src[l.i] == '\n' {
		l.line++
		l.col = 1
	} else {
		l.col++
	}
	l.i++
}

func (l *locator) here() position { return position{l.line, l.col} }

func (l *locator) record(key toml.Key, p position) {
	for n := 1; n <= len(key); n++ {
		k := key[:n].String()
		if _, ok := l.out[k]; !ok {
			l.out[k] = p
		}
	}
}

func (l *locator) skipSpace() {
	for !l.eof() && (l.src[l.i] == ' ' || l.src[l.i] == '\t') {
		l.advance()
	}
}

// skipBlank skips whitespace, newlines and comments.
func (l *locator) skipBlank() {
	for !l.eof() {
		switch l.src[l.i] {
		case ' ', '\t', '\r', '\n':
			l.advance()
		case '#':
			for !l.eof() && l.src[l.i] != '\n' {
				l.advance()
			}
		default:
			return
		}
	}
}

func (l *locator) document() {
	var table toml.Key
	for {
		l.skipBlank()
		if l.eof() {
			return
		}
		if l.src[l.i] == '[' {
			arr := l.peek(1) == '['
			l.advance()
			if arr {
				l.advance()
			}
			l.skipSpace()
			p := l.here()
			table = l.key()
			l.record(table, p)
			for !l.eof() && l.src[l.i] != '\n' && l.src[l.i] != '#' {
				l.advance() // the closing bracket(s)
			}
			continue
		}
		before := l.i
		l.keyValue(table)
		if l.i == before {
			l.advance() // never loop on text this scanner does not understand
		}
	}
}

// keyValue reads "key = value" under parent.
func (l *locator) keyValue(parent toml.Key) {
	p := l.here()
	k := append(append(toml.Key{}, parent...), l.key()...)
	l.record(k, p)
	l.skipSpace()
	if !l.eof() && l.src[l.i] == '=' {
		l.advance()
	}
	l.skipSpace()
	l.value(k, true)
}

// key reads a possibly dotted, possibly quoted key.
func (l *locator) key() toml.Key {
	var k toml.Key
	for !l.eof() {
		l.skipSpace()
		switch l.peek(0) {
		case '"':
			k = append(k, l.basicString())
		case '\'':
			k = append(k, l.literalString())
		default:
			start := l.i
			for !l.eof() && isBare(l.src[l.i]) {
				l.advance()
			}
			k = append(k, string(l.src[start:l.i]))
		}
		l.skipSpace()
		if l.peek(0) != '.' {
			return k
		}
		l.advance()
	}
	return k
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// value skips one value, recording the keys of inline tables when rec is set.
func (l *locator) value(k toml.Key, rec bool) {
	switch l.peek(0) {
	case '"':
		if l.peek(1) == '"' && l.peek(2) == '"' {
			l.multiline('"')
		} else {
			l.basicString()
		}
	case '\'':
		if l.peek(1) == '\'' && l.peek(2) == '\'' {
			l.multiline('\'')
		} else {
			l.literalString()
		}
	case '{':
		l.advance()
		for {
			l.skipBlank()
			if l.eof() {
				return
			}
			if l.src[l.i] == '}' {
				l.advance()
				return
			}
			if l.src[l.i] == ',' {
				l.advance()
				continue
			}
			if rec {
				l.keyValue(k)
			} else {
				l.key()
				l.skipSpace()
				l.advance() // '='
				l.skipSpace()
				l.value(nil, false)
			}
		}
	case '[':
		l.advance()
		for {
			l.skipBlank()
			if l.eof() {
				return
			}
			switch l.src[l.i] {
			case ']':
				l.advance()
				return
			case ',':
				l.advance()
			default:
				l.value(nil, false)
			}
		}
	default: // number, boolean, date-time: up to a delimiter
		for !l.eof() && !strings.ContainsRune(",]}\n#", rune(l.src[l.i])) {
			l.advance()
		}
	}
}

// basicString reads a "..." string and returns its value.
func (l *locator) basicString() string {
	l.advance()
	var b strings.Builder
	for !l.eof() && l.src[l.i] != '"' && l.src[l.i] != '\n' {
		c := l.src[l.i]
		if c != '\\' {
			b.WriteByte(c)
			l.advance()
			continue
		}
		l.advance()
		e := l.peek(0)
		l.advance()
		switch e {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			start := l.i
			for j := 0; j < n && !l.eof(); j++ {
				l.advance()
			}
			if r, err := strconv.ParseUint(string(l.src[start:l.i]), 16, 32); err == nil {
				b.WriteRune(rune(r))
			}
		default:
			b.WriteByte(e)
		}
	}
	l.advance() // closing quote
	return b.String()
}

// literalString reads a '...' string and returns its value.
func (l *locator) literalString() string {
	l.advance()
	start := l.i
	for !l.eof() && l.src[l.i] != '\'' && l.src[l.i] != '\n' {
		l.advance()
	}
	s := string(l.src[start:l.i])
	l.advance()
	return s
}

// multiline skips a """...""" or ”'...”' string (up to two extra closing
// quotes belong to the content).
func (l *locator) multiline(q byte) {
	for range 3 {
		l.advance()
	}
	for !l.eof() {
		c := l.src[l.i]
		if c == '\\' && q == '"' {
			l.advance()
			l.advance()
			continue
		}
		if c == q && l.peek(1) == q && l.peek(2) == q {
			for range 3 {
				l.advance()
			}
			for n := 0; n < 2 && l.peek(0) == q; n++ {
				l.advance()
			}
			return
		}
		l.advance()
	}
}
