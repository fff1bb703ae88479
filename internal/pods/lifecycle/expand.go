package lifecycle

import "strings"

// Expand is the kubelet's $(VAR) expansion of env values, commands and args
// (third_party/forked/golang/expansion): $(NAME) becomes the variable's value when vars defines
// it and stays as written otherwise, $$ is a literal $, and any other $ (a lone one, $NAME, an
// unterminated $( ) is kept.
func Expand(s string, vars map[string]string) string {
	return ExpandWith(s, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}

// ExpandWith is Expand with the variables given by lookup.
func ExpandWith(s string, lookup func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '$')
		if i < 0 || i == len(s)-1 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch s[1] {
		case '$':
			b.WriteByte('$')
			s = s[2:]
			continue
		case '(':
			if end := strings.IndexByte(s, ')'); end > 0 {
				if v, ok := lookup(s[2:end]); ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[:end+1])
				}
				s = s[end+1:]
				continue
			}
		}
		b.WriteByte('$')
		s = s[1:]
	}
	return b.String()
}
